"""reset_password and update_contact_info act on the session's own account only."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.demo.fixtures import HAN_MEIMEI_EMAIL, HAN_MEIMEI_PHONE, LI_LEI, LI_LEI_PHONE
from app.demo.tools.account import reset_password, update_contact_info
from app.errors import ToolHandlerError
from tests.demo.tools.conftest import Ctx, conforms, count


@pytest.mark.parametrize("phone", [LI_LEI_PHONE, "+86" + LI_LEI_PHONE])
async def test_reset_link_goes_to_the_registered_phone(
    ctx: Ctx, demo_path: Path, phone: str
) -> None:
    data = await reset_password(ctx(), phone=phone)
    conforms("reset_password", data)
    assert data == {"status": "reset_link_sent", "channel": "sms", "masked_phone": "138****8000"}
    assert count(demo_path, "password_resets WHERE customer_id = ?", LI_LEI) == 1


async def test_a_phone_that_is_not_the_users_is_refused(ctx: Ctx, demo_path: Path) -> None:
    with pytest.raises(ToolHandlerError) as caught:
        await reset_password(ctx(), phone=HAN_MEIMEI_PHONE)
    assert caught.value.code == "phone_mismatch"
    assert LI_LEI_PHONE not in caught.value.message
    assert count(demo_path, "password_resets") == 0


async def test_same_key_sends_one_reset(ctx: Ctx, demo_path: Path) -> None:
    first = await reset_password(ctx(key="idem_pw"), phone=LI_LEI_PHONE)
    again = await reset_password(ctx(key="idem_pw"), phone=LI_LEI_PHONE)
    assert again == first
    assert count(demo_path, "password_resets") == 1


@pytest.mark.parametrize(
    ("field", "value", "masked", "stored"),
    [
        ("email", "Li.Lei@Example.net", "l***@example.net", "li.lei@example.net"),
        ("phone", "+86 138 0000 1111", "138****1111", "13800001111"),
        (
            "address",
            "上海市徐汇区漕溪北路18号3楼",
            "上海市徐汇区***",
            "上海市徐汇区漕溪北路18号3楼",
        ),
    ],
)
async def test_update_contact_info(
    ctx: Ctx, demo_path: Path, field: str, value: str, masked: str, stored: str
) -> None:
    data = await update_contact_info(ctx(), field=field, value=value)
    conforms("update_contact_info", data)
    assert data == {"field": field, "status": "updated", "masked_value": masked}
    assert count(demo_path, f"customers WHERE id = ? AND {field} = ?", LI_LEI, stored) == 1
    assert (
        count(demo_path, "contact_changes WHERE customer_id = ? AND field = ?", LI_LEI, field) == 1
    )


async def test_another_customers_email_cannot_be_taken(ctx: Ctx) -> None:
    with pytest.raises(ToolHandlerError) as caught:
        await update_contact_info(ctx(), field="email", value=HAN_MEIMEI_EMAIL)
    assert caught.value.code == "value_not_allowed"
    assert HAN_MEIMEI_EMAIL not in caught.value.message


@pytest.mark.parametrize(("field", "value"), [("phone", "12345"), ("email", "not-an-email")])
async def test_malformed_values_are_refused_with_a_hint(ctx: Ctx, field: str, value: str) -> None:
    with pytest.raises(ToolHandlerError) as caught:
        await update_contact_info(ctx(), field=field, value=value)
    assert caught.value.code == "invalid_value"
