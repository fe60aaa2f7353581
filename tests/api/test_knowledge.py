"""The knowledge routes through HTTP, on the service on a real socket, on both engines: add as
JSON or as an upload, versions by identity, list, read, delete, search with snippets; sizes
refused before they are read, documents that cannot be read refused whole; roles and tenants."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.api.routes.knowledge import FORM_ROOM
from app.testing import LiveService, serve
from tests.api.test_sessions import assert_error
from tests.knowledge.test_parsing import _pdf

DOCS = "/v1/knowledge/documents"
SEARCH = "/v1/knowledge/search"
ADMIN, OPERATOR, AGENT = "acme-admin-key-0001", "acme-operator-key-01", "acme-agent-key-0001"
OTHER = "globex-operator-key-1"  # another tenant's operator
MIB = 2**20
LIMIT = 5 * MIB  # the knowledge limit's default

REFUNDS = """# Refunds

## Refund times

Refunds are paid back to the original payment method within 7 working days after the
returned item arrives at our warehouse.

## Damaged items

A damaged item is replaced free of charge; we pay the return shipping.
"""
REFUNDS_V2 = REFUNDS.replace("within 7 working days", "within 3 working days").replace(
    "original payment method", "customer's wallet"
)


def as_(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
async def svc(make_settings: Any) -> AsyncIterator[LiveService]:
    settings = make_settings(
        auth="api_key",
        api_keys=[
            f"acme:admin:{ADMIN}",
            f"acme:operator:{OPERATOR}",
            f"acme:agent:{AGENT}",
            f"globex:operator:{OTHER}",
        ],
        key_pepper="pepper-for-the-knowledge-tests",
        knowledge_dir="",  # no demo documents: each test sees only its own
    )
    async with serve(settings) as service:
        service.client.headers.update(as_(OPERATOR))
        yield service


async def add(svc: LiveService, status: int = 201, **body: Any) -> dict[str, Any]:
    document = {"title": "Refund policy", "content": REFUNDS, "format": "markdown", **body}
    response = await svc.client.post(DOCS, json=document)
    assert response.status_code == status, response.text
    return dict(response.json())


async def hits(svc: LiveService, q: str, **params: Any) -> list[dict[str, Any]]:
    response = await svc.client.get(SEARCH, params={"q": q, **params})
    assert response.status_code == 200, response.text
    return list(response.json()["items"])


async def count(svc: LiveService, key: str = OPERATOR) -> int:
    response = await svc.client.get(DOCS, params={"limit": 200}, headers=as_(key))
    assert response.status_code == 200, response.text
    return len(response.json()["items"])


# -- the main flow ---------------------------------------------------------------------------


async def test_add_read_list_search_and_delete(svc: LiveService) -> None:
    added = await add(svc, tags=["refunds", "policy"], language="en", valid_from="2020-01-01")
    assert added["action"] == "added" and added["version"] == 1
    assert (added["title"], added["source"], added["format"], added["language"]) == (
        "Refund policy", "Refund policy", "markdown", "en",
    )  # fmt: skip
    assert added["tags"] == ["refunds", "policy"] and added["trusted"] is False
    assert added["valid_from"] == "2020-01-01T00:00:00Z" and added["valid_until"] is None
    assert added["chunk_count"] >= 2 and added["created_at"].endswith("Z")
    assert added["created_by"].startswith("operator:key_")

    read = (await svc.client.get(f"{DOCS}/{added['id']}")).json()
    assert read == {k: v for k, v in added.items() if k != "action"}
    listed = (await svc.client.get(DOCS)).json()
    assert [d["id"] for d in listed["items"]] == [added["id"]] and listed["next_cursor"] is None

    (best, *_) = await hits(svc, "refund times")
    assert set(best) == {"document_id", "chunk_id", "title", "section", "snippet", "score"}
    assert (best["document_id"], best["title"]) == (added["id"], "Refund policy")
    assert best["section"] == "Refunds › Refund times"
    assert "7 working days" in best["snippet"] and 0.55 <= best["score"] <= 1

    deleted = await svc.client.delete(f"{DOCS}/{added['id']}")
    assert deleted.status_code == 204 and deleted.content == b""
    assert await hits(svc, "refund times") == []
    assert_error(await svc.client.get(f"{DOCS}/{added['id']}"), 404, "document_not_found")
    assert_error(await svc.client.delete(f"{DOCS}/{added['id']}"), 404, "document_not_found")
    assert await count(svc) == 0


async def test_the_same_title_with_new_content_is_the_next_version(svc: LiveService) -> None:
    first = await add(svc)
    assert "7 working days" in (await hits(svc, "refund working days"))[0]["snippet"]
    second = await add(svc, content=REFUNDS_V2)
    assert (second["id"], second["version"], second["action"]) == (first["id"], 2, "updated")
    found = await hits(svc, "refund working days")
    assert found and all("7 working days" not in h["snippet"] for h in found)
    assert "3 working days" in found[0]["snippet"]
    assert await hits(svc, "original payment method") == []  # the old text is gone

    again = await add(svc, status=200, content=REFUNDS_V2)
    assert (again["id"], again["version"], again["action"]) == (first["id"], 2, "unchanged")
    # Metadata is part of a version too; the source URL, when given, is the identity.
    tagged = await add(svc, content=REFUNDS_V2, tags=["refunds"])
    assert (tagged["version"], tagged["action"]) == (3, "updated")
    by_url = await add(svc, source_url="https://shop.example/refunds")
    assert by_url["id"] != first["id"] and by_url["source"] == "https://shop.example/refunds"
    assert await count(svc) == 2


async def test_an_expired_document_is_stored_but_never_found(svc: LiveService) -> None:
    old = await add(svc, valid_until="2020-01-31")
    assert old["valid_until"] == "2020-02-01T00:00:00Z"  # through the day's end, UTC
    later = await add(svc, title="Later", valid_from="9000-01-01T00:00:00+08:00")
    assert later["valid_from"] == "8999-12-31T16:00:00Z"
    lower = await add(  # RFC 3339 also allows a lower-case "t" and "z"
        svc, title="Lower", valid_from="0009-01-08t05:43:34.6039z", valid_until="2000-01-01"
    )
    assert lower["valid_from"].startswith("0009-01-08T05:43:34")
    assert await hits(svc, "refund times") == []
    assert await count(svc) == 3


async def test_search_prefers_a_language_and_takes_a_limit(svc: LiveService) -> None:
    await add(svc)
    zh = "# 退款\n\n## 退款时间\n\n退款 refund 在收到退货后7个工作日内原路退回。\n"
    await add(svc, title="退款政策", content=zh)
    both = await hits(svc, "refund 退款", limit=20)
    assert {h["title"] for h in both} == {"Refund policy", "退款政策"}
    assert (await hits(svc, "refund 退款", language="zh"))[0]["title"] == "退款政策"
    assert len(await hits(svc, "refund 退款", limit=1)) == 1


async def test_documents_are_listed_newest_first_a_page_at_a_time(svc: LiveService) -> None:
    ids = [(await add(svc, title=f"Policy {i}"))["id"] for i in range(3)]
    first = (await svc.client.get(DOCS, params={"limit": 2})).json()
    assert [d["id"] for d in first["items"]] == ids[::-1][:2] and first["next_cursor"]
    rest = (await svc.client.get(DOCS, params={"limit": 2, "cursor": first["next_cursor"]})).json()
    assert [d["id"] for d in rest["items"]] == ids[:1] and rest["next_cursor"] is None


# -- uploads -----------------------------------------------------------------------------------


async def test_a_markdown_upload_is_named_by_its_file(svc: LiveService) -> None:
    response = await svc.client.post(
        DOCS,
        files={"file": ("policies/refunds.md", REFUNDS.encode(), "application/octet-stream")},
        data={"tags": "refunds, policy", "valid_until": "9000-01-01", "language": "en"},
    )
    assert response.status_code == 201, response.text
    added = response.json()
    assert (added["source"], added["title"], added["format"]) == (
        "refunds.md", "Refunds", "markdown",
    )  # fmt: skip
    assert added["tags"] == ["refunds", "policy"]
    assert (await hits(svc, "damaged item"))[0]["section"] == "Refunds › Damaged items"
    # The same file again: nothing changes; a title given names it without changing identity.
    again = await svc.client.post(
        DOCS,
        files={"file": ("refunds.md", REFUNDS.encode())},
        data={"tags": "refunds,policy", "valid_until": "9000-01-01", "language": "en"},
    )
    assert (again.status_code, again.json()["action"]) == (200, "unchanged")


async def test_hidden_characters_alone_are_no_title_and_no_tag(svc: LiveService) -> None:
    added = await add(svc, title="\u0012\u200b", tags=["\u0012", " refunds "])
    assert (added["title"], added["tags"]) == ("Refunds", ["refunds"])  # its own heading
    assert added["source"].startswith("untitled-")  # named by its content
    again = await add(svc, 200, title="\u0012", tags=["\u0012", " refunds "])
    assert (again["action"], again["id"]) == ("unchanged", added["id"])


async def test_an_uploads_tags_are_at_most_twenty_of_sixty_four_characters(
    svc: LiveService,
) -> None:
    async def upload(tags: str) -> httpx.Response:
        files = {"file": ("refunds.md", REFUNDS.encode())}
        return await svc.client.post(DOCS, files=files, data={"tags": tags})

    for tags in (",".join(["t"] * 21), "x" * 65):
        response = await upload(tags)
        assert response.status_code == 422, response.text
        assert response.json()["error"]["details"]["errors"][0]["field"] == "body.tags"
    response = await upload(",".join(["t"] * 17) + ",\u0012, ," + "y" * 64)  # 20 parts
    assert response.status_code == 201, response.text
    assert response.json()["tags"] == ["t"] * 17 + ["y" * 64]
    assert await count(svc) == 1


async def test_a_pdf_upload_and_its_format_by_media_type(svc: LiveService) -> None:
    pdf = _pdf(["Refunds to a bank card take 3-7 working days.", "Alipay: 24 hours."])
    response = await svc.client.post(DOCS, files={"file": ("times", pdf, "application/pdf")})
    assert response.status_code == 201, response.text
    assert (response.json()["format"], response.json()["title"]) == ("pdf", "Refund times")
    assert "bank card" in (await hits(svc, "bank card refund"))[0]["snippet"]
    html = b"<html><title>Hours</title><body><h1>Hours</h1><p>Open 9 to 18.</p></body></html>"
    typed = await svc.client.post(DOCS, files={"file": ("hours", html, "text/html")})
    assert typed.json()["format"] == "html"


async def test_a_document_that_cannot_be_read_is_a_422_and_leaves_nothing(
    svc: LiveService,
) -> None:
    garbage = await svc.client.post(
        DOCS, files={"file": ("broken.pdf", b"%PDF-1.4 this is no pdf", "application/pdf")}
    )
    assert "PDF" in assert_error(garbage, 422, "invalid_document")["message"]
    unknown = await svc.client.post(DOCS, files={"file": ("terms.docx", b"PK\x03\x04 zip")})
    assert "'.docx'" in assert_error(unknown, 422, "invalid_document")["message"]
    binary = await svc.client.post(DOCS, files={"file": ("notes.txt", b"\xff\xfe\x00bad")})
    assert_error(binary, 422, "invalid_document")
    empty = await add(svc, 422, content="   \n\n")
    assert empty["error"]["code"] == "invalid_document"
    assert await count(svc) == 0
    # A version that cannot be read leaves the stored one as it was.
    first = await add(svc)
    await add(svc, 422, content="<p></p>", format="html")
    assert (await svc.client.get(f"{DOCS}/{first['id']}")).json()["version"] == 1
    assert await hits(svc, "refund times")


# -- sizes -------------------------------------------------------------------------------------


async def _upload_parts(total: int, piece: int = 256 * 1024) -> AsyncIterator[bytes]:
    """A multipart upload of a file of `total` bytes, sent a piece at a time (no length)."""
    yield b'--x\r\nContent-Disposition: form-data; name="file"; filename="big.txt"\r\n\r\n'
    sent = 0
    while sent < total:
        yield b"a" * min(piece, total - sent)
        sent += piece


async def test_a_body_over_the_limit_is_a_413_before_it_is_read(svc: LiveService) -> None:
    big = "x" * (6 * MIB)
    as_json = await svc.client.post(DOCS, json={"title": "Big", "content": big, "format": "text"})
    assert_error(as_json, 413, "payload_too_large")
    upload = await svc.client.post(DOCS, files={"file": ("big.txt", big.encode())})
    assert_error(upload, 413, "payload_too_large")
    # Without a Content-Length the body is counted as it arrives.
    streamed = await svc.client.post(
        DOCS,
        content=_upload_parts(6 * MIB),
        headers={"Content-Type": "multipart/form-data; boundary=x"},
    )
    assert_error(streamed, 413, "payload_too_large")
    assert await count(svc) == 0


async def test_a_document_over_the_limit_within_the_body_limit_is_a_413(svc: LiveService) -> None:
    over = "x" * (LIMIT + 1)
    as_json = await svc.client.post(DOCS, json={"title": "Big", "content": over, "format": "text"})
    assert_error(as_json, 413, "document_too_large")
    upload = await svc.client.post(DOCS, files={"file": ("big.txt", over.encode())})
    error = assert_error(upload, 413, "document_too_large")
    assert error["details"]["limit"] == LIMIT
    assert await count(svc) == 0
    # The other paths keep the body limit of every request (1 MiB).
    other = await svc.client.post("/v1/sessions", json={"user_id": "u1", "x": "y" * MIB})
    assert_error(other, 413, "payload_too_large")
    # Up to the limit is fine, room for the form's other parts included.
    at_limit = "word " * (LIMIT // 5)
    assert len(at_limit) + FORM_ROOM // 2 < LIMIT + FORM_ROOM
    fits = await svc.client.post(DOCS, files={"file": ("large.txt", at_limit.encode())})
    assert fits.status_code == 201, fits.text


# -- roles and tenants --------------------------------------------------------------------------


async def test_roles(svc: LiveService) -> None:
    document = await add(svc)
    url = f"{DOCS}/{document['id']}"
    # agents read and search, never write
    assert (await svc.client.get(DOCS, headers=as_(AGENT))).status_code == 200
    assert (await svc.client.get(url, headers=as_(AGENT))).status_code == 200
    found = await svc.client.get(SEARCH, params={"q": "refund"}, headers=as_(AGENT))
    assert found.status_code == 200 and found.json()["items"]
    new = {"title": "T", "content": "text", "format": "text"}
    assert_error(await svc.client.post(DOCS, json=new, headers=as_(AGENT)), 403, "forbidden")
    assert_error(await svc.client.delete(url, headers=as_(AGENT)), 403, "forbidden")
    # only an admin marks a document trusted
    trusted = {**new, "trusted": True}
    refused = await svc.client.post(DOCS, json=trusted, headers=as_(OPERATOR))
    assert "admin" in assert_error(refused, 403, "forbidden")["message"]
    upload = await svc.client.post(
        DOCS, files={"file": ("t.txt", b"text")}, data={"trusted": "true"}
    )
    assert_error(upload, 403, "forbidden")
    made = await svc.client.post(DOCS, json=trusted, headers=as_(ADMIN))
    assert made.status_code == 201 and made.json()["trusted"] is True
    assert made.json()["created_by"].startswith("admin:")
    # a customer key reads nothing, searches nothing
    key = await svc.client.post(
        "/v1/keys", json={"role": "customer", "user_id": "cust_1"}, headers=as_(ADMIN)
    )
    customer = as_(key.json()["key"])
    for response in (
        await svc.client.get(DOCS, headers=customer),
        await svc.client.get(url, headers=customer),
        await svc.client.get(SEARCH, params={"q": "refund"}, headers=customer),
        await svc.client.post(DOCS, json=new, headers=customer),
        await svc.client.delete(url, headers=customer),
    ):
        assert_error(response, 403, "forbidden")
    # and no key at all is a 401
    anonymous = httpx.AsyncClient(base_url=svc.base_url)
    async with anonymous:
        assert_error(await anonymous.get(SEARCH, params={"q": "refund"}), 401, "unauthorized")
    assert await count(svc) == 2


async def test_another_tenants_documents_are_not_there(svc: LiveService) -> None:
    document = await add(svc)
    url = f"{DOCS}/{document['id']}"
    other = as_(OTHER)
    assert_error(await svc.client.get(url, headers=other), 404, "document_not_found")
    assert_error(await svc.client.delete(url, headers=other), 404, "document_not_found")
    assert await count(svc, OTHER) == 0
    found = await svc.client.get(SEARCH, params={"q": "refund"}, headers=other)
    assert found.json()["items"] == []
    # the same title in the other tenant is its own document, version 1
    theirs = await svc.client.post(
        DOCS, json={"title": "Refund policy", "content": REFUNDS_V2, "format": "markdown"},
        headers=other,
    )  # fmt: skip
    assert (theirs.json()["version"], theirs.json()["action"]) == (1, "added")
    assert (await svc.client.get(url)).json()["version"] == 1
    assert "7 working days" in (await hits(svc, "refund working days"))[0]["snippet"]


# -- validation ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"q": ""}, "q"),
        ({"q": "   "}, "q"),
        ({"q": "refund", "limit": 0}, "limit"),
        ({"q": "refund", "limit": 21}, "limit"),
        ({"q": "refund", "language": "fr"}, "language"),
        ({}, "q"),
    ],
)
async def test_search_parameters_are_checked(
    svc: LiveService, params: dict[str, Any], field: str
) -> None:
    error = assert_error(await svc.client.get(SEARCH, params=params), 422, "validation_error")
    assert [e["field"] for e in error["details"]["errors"]] == [f"query.{field}"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"format": "pdf"}, "body.format"),
        ({"format": "docx"}, "body.format"),
        ({"title": ""}, "body.title"),
        ({"content": ""}, "body.content"),
        ({"valid_until": "2026-02-30"}, "body.valid_until"),
        ({"valid_from": "2026-01-01T00:00:00"}, "body.valid_from"),  # no zone
        ({"source_url": "ftp://x"}, "body.source_url"),
        ({"source_url": "http://["}, "body.source_url"),
        ({"source_url": "https://user@host/x"}, "body.source_url"),
        ({"source_url": "https://host/x\u0085y"}, "body.source_url"),  # a next-line character
        ({"source_url": "https://host/x\u3000y"}, "body.source_url"),  # an ideographic space
        ({"trusted": 0}, "body.trusted"),  # JSON's false is false, not 0
        ({"language": "fr"}, "body.language"),
        ({"owner": "me"}, "body.owner"),
        ({"tags": ["x" * 65]}, "body.tags.0"),
    ],
)
async def test_document_bodies_are_checked(
    svc: LiveService, body: dict[str, Any], field: str
) -> None:
    error = await add(svc, 422, **body)
    assert error["error"]["code"] == "validation_error"
    assert field in [e["field"] for e in error["error"]["details"]["errors"]]


async def test_a_source_url_may_have_a_port_a_query_and_a_fragment(svc: LiveService) -> None:
    url = "http://10.0.0.7:8443/help/returns?lang=en&v=2#fees"
    assert (await add(svc, source_url=url))["source"] == url
    unencoded = "https://help.example.com/zh/退货政策"
    assert (await add(svc, source_url=unencoded))["source"] == unencoded


async def test_other_bad_requests(svc: LiveService) -> None:
    backwards = await add(svc, 422, valid_from="2026-02-01", valid_until="2026-01-01")
    assert backwards["error"]["details"]["field"] == "valid_until"
    not_json = await svc.client.post(
        DOCS, content=b'{"title": ', headers={"Content-Type": "application/json"}
    )
    assert_error(not_json, 400, "invalid_json")
    plain = await svc.client.post(DOCS, content=REFUNDS, headers={"Content-Type": "text/plain"})
    assert_error(plain, 415, "unsupported_media_type")
    no_file = await svc.client.post(DOCS, files={"title": (None, "x")})
    assert_error(no_file, 422, "validation_error")
    tags = await svc.client.post(
        DOCS, files={"file": ("a.txt", b"text")}, data={"tags": ",".join(["t"] * 21)}
    )
    assert_error(tags, 422, "validation_error")
    long_name = await svc.client.post(DOCS, files={"file": ("x" * 297 + ".txt", b"text")})
    assert assert_error(long_name, 422, "validation_error")["details"]["field"] == "file"
    assert_error(await svc.client.get(DOCS, params={"limit": 0}), 422, "validation_error")
    assert_error(await svc.client.get(DOCS, params={"cursor": "nope"}), 422, "validation_error")
    assert_error(await svc.client.get(f"{DOCS}/{'x' * 129}"), 422, "validation_error")
    assert await count(svc) == 0


async def test_the_openapi_document_describes_both_bodies(svc: LiveService) -> None:
    doc = (await svc.client.get("/openapi.json")).json()
    post = doc["paths"][DOCS]["post"]
    content = post["requestBody"]["content"]
    assert content["application/json"]["schema"]["required"] == ["title", "content", "format"]
    upload = content["multipart/form-data"]["schema"]
    assert upload["required"] == ["file"] and upload["properties"]["file"]["format"] == "binary"
    # A form field is a value or absent: no null alternative (a client would send "null").
    assert "null" not in json.dumps(upload["properties"])
    assert upload["properties"]["source_url"]["type"] == "string"
    assert {"200", "201", "403", "413", "415"} <= set(post["responses"])
    assert set(doc["paths"][SEARCH]["get"]["responses"]["200"]["content"]) == {"application/json"}
    params = {p["name"] for p in doc["paths"][DOCS]["get"]["parameters"]}
    assert params == {"limit", "cursor"}
