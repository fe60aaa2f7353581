"""A principal's role and user binding go together: no principal can be made with a customer
role and no user, or a staff role and a user."""

from __future__ import annotations

import pytest

from app.principal import Principal, binding_problem


@pytest.mark.parametrize(
    ("role", "user_id", "fits"),
    [
        ("customer", "cust_0001", True),
        ("customer", None, False),
        ("customer", "", False),
        ("agent", None, True),
        ("agent", "cust_0001", False),
        ("operator", "cust_0001", False),
        ("admin", None, True),
        ("admin", "cust_0001", False),
    ],
)
def test_a_binding_fits_its_role(role: str, user_id: str | None, fits: bool) -> None:
    assert (binding_problem(role, user_id) is None) is fits
    if fits:
        assert Principal("acme", role, "key_1", user_id).user_id == user_id  # type: ignore[arg-type]
    else:
        with pytest.raises(ValueError, match="bound"):
            Principal("acme", role, "key_1", user_id)  # type: ignore[arg-type]
