"""The well-known demo records (tool_contract.md). They are written first, by hand, so every
generated file has them whatever the seed; the random filler steers clear of their ids."""

from __future__ import annotations

from datetime import datetime

from app.demo.world import CST, Event, Item, World

LI_LEI = "cust_0001"
LI_LEI_PHONE = "13800138000"
LI_LEI_EMAIL = "li.lei@example.com"
HAN_MEIMEI = "cust_0002"
HAN_MEIMEI_PHONE = "13900139000"
HAN_MEIMEI_EMAIL = "han.meimei@example.com"

SHIPPED_ORDER = "202405201234"  # cust_0001, shipped, SF Express, in transit
SHIPPED_TRACKING = "SF123456789CN"
DELIVERED_ORDER = "202405201235"  # cust_0001, delivered, 89.00 CNY
DELIVERED_TRACKING = "JD001234567890"
FOREIGN_ORDER = "202405209999"  # cust_0002, paid: cust_0001 must be told it does not exist


def _at(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2024, 5, day, hour, minute, tzinfo=CST)


def add_fixtures(world: World) -> None:
    li_lei_address = "北京市朝阳区建国路88号SOHO现代城2号楼1203室"
    world.customer(
        LI_LEI,
        name="李雷",
        language="zh",
        phone=LI_LEI_PHONE,
        email=LI_LEI_EMAIL,
        address=li_lei_address,
        created_at=datetime(2021, 3, 14, 9, 26, tzinfo=CST),
    )
    world.customer(
        HAN_MEIMEI,
        name="韩梅梅",
        language="zh",
        phone=HAN_MEIMEI_PHONE,
        email=HAN_MEIMEI_EMAIL,
        address="上海市浦东新区世纪大道100号15楼1502室",
        created_at=datetime(2022, 7, 2, 20, 11, tzinfo=CST),
    )

    world.order(
        SHIPPED_ORDER,
        customer_id=LI_LEI,
        status="shipped",
        items=[Item("无线蓝牙耳机", 1, 29900), Item("手机保护壳", 2, 3900)],
        ship_to=li_lei_address,
        created_at=_at(20, 9, 41),
        updated_at=_at(20, 18, 5),
    )
    world.shipment(
        SHIPPED_TRACKING,
        order_id=SHIPPED_ORDER,
        carrier="SF Express",
        status="in_transit",
        estimated_delivery="2024-05-23",
        events=[
            Event(_at(20, 18, 5), "广东省深圳市", "顺丰速运已揽收"),
            Event(_at(20, 23, 40), "广东省深圳市", "快件已从深圳转运中心发出"),
            Event(_at(21, 21, 15), "北京市", "快件已到达北京转运中心"),
        ],
    )

    world.order(
        DELIVERED_ORDER,
        customer_id=LI_LEI,
        status="delivered",
        items=[Item("USB-C 充电线", 1, 8900)],
        ship_to=li_lei_address,
        created_at=_at(20, 10, 12),
        updated_at=_at(21, 15, 30),
    )
    world.shipment(
        DELIVERED_TRACKING,
        order_id=DELIVERED_ORDER,
        carrier="JD Logistics",
        status="delivered",
        estimated_delivery=None,
        events=[
            Event(_at(20, 14, 2), "北京市大兴区", "京东物流已揽收"),
            Event(_at(21, 8, 47), "北京市朝阳区", "快件正在派送中，请保持电话畅通"),
            Event(_at(21, 15, 30), "北京市朝阳区", "快件已签收，签收人：本人"),
        ],
    )

    world.order(
        FOREIGN_ORDER,
        customer_id=HAN_MEIMEI,
        status="paid",
        items=[Item("护肤套装", 1, 39900)],
        ship_to="上海市浦东新区世纪大道100号15楼1502室",
        created_at=_at(20, 21, 30),
        updated_at=_at(20, 21, 32),
    )
