"""Optional JWT bearer tokens, mapped to the same `Principal` as an API key.

HS256 with HERMES_JWT_SECRET, and/or RS256/ES256 with the public keys of a JWKS
(HERMES_JWT_JWKS: a file, or an http(s) URL on loopback such as a local identity proxy). Only
those algorithms are accepted, never `none`, and an HS256 token is never checked against a JWKS
public key. Every token needs `exp`, `sub`, `tenant` and `role` (customer, agent, operator or
admin); `user` binds it to one customer like a key made with `--user`; `nbf` is honoured, `aud`
and `iss` are required when HERMES_JWT_AUDIENCE / HERMES_JWT_ISSUER are set.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import jwt

from app.errors import Unauthorized
from app.principal import Principal, binding_problem

ROLES = ("customer", "agent", "operator", "admin")
_ASYMMETRIC = ("RS256", "ES256")


class JwtVerifier:
    def __init__(
        self,
        *,
        secret: bytes | None,
        jwks: str | None,
        audience: str | None,
        issuer: str | None,
        leeway_s: float,
    ) -> None:
        self._secret = secret
        self._audience = audience
        self._issuer = issuer
        self._leeway = leeway_s
        self._keys: jwt.PyJWKSet | None = None
        self._client: jwt.PyJWKClient | None = None
        if jwks is not None and jwks.startswith(("http://", "https://")):
            self._client = jwt.PyJWKClient(jwks, cache_keys=True, lifespan=300, timeout=5)
        elif jwks is not None:
            self._keys = jwt.PyJWKSet.from_json(Path(jwks).read_text(encoding="utf-8"))

    @staticmethod
    def looks_like(token: str) -> bool:
        return token.count(".") == 2 and token.startswith("ey")

    async def resolve(self, token: str) -> Principal:
        try:
            header = jwt.get_unverified_header(token)
            alg = header.get("alg")
            if alg == "HS256" and self._secret is not None:
                key: Any = self._secret
            elif alg in _ASYMMETRIC and (self._keys or self._client):
                key = await self._public_key(token, header.get("kid"))
            else:
                raise Unauthorized("this token's algorithm is not accepted", alg=str(alg)[:16])
            claims = jwt.decode(
                token,
                key,
                algorithms=[alg],
                audience=self._audience,
                issuer=self._issuer,
                leeway=self._leeway,
                options={"require": ["exp", "sub"]},
            )
        except jwt.ExpiredSignatureError:
            raise Unauthorized("the token has expired", expired=True) from None
        except (jwt.PyJWTError, ValueError, KeyError) as exc:
            raise Unauthorized(f"not a valid token: {type(exc).__name__}") from None
        tenant, role, user = claims.get("tenant"), claims.get("role"), claims.get("user")
        if not isinstance(tenant, str) or not tenant or role not in ROLES:
            raise Unauthorized("the token needs a tenant and a role claim")
        if user is not None and (not isinstance(user, str) or not user):
            raise Unauthorized("the token's user claim must be a user id")
        problem = binding_problem(role, user)
        if problem is not None:
            raise Unauthorized(f"the token's role and user claims do not fit: {problem}")
        return Principal(
            tenant_id=tenant,
            role=role,
            subject=f"jwt:{claims['sub']}"[:200],
            user_id=user,
            # Accepted until then (the leeway allows for the issuer's clock): so is whatever
            # is made from it, a desk sign-in or a stream token.
            expires_at=float(claims["exp"]) + self._leeway,
        )

    async def _public_key(self, token: str, kid: str | None) -> Any:
        if self._client is not None:
            client = self._client
            signing = await asyncio.to_thread(client.get_signing_key_from_jwt, token)
            return signing.key
        assert self._keys is not None
        for candidate in self._keys.keys:
            if kid is None or candidate.key_id == kid:
                return candidate.key
        raise KeyError("no key in the JWKS has this token's kid")
