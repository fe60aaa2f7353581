"""Customer-facing wording, in the customer's language (`zh` or `en`)."""

from __future__ import annotations

ORDER_STATUS_TEXT: dict[str, dict[str, str]] = {
    "zh": {
        "pending": "待付款",
        "paid": "已付款，等待发货",
        "shipped": "已发货",
        "delivered": "已签收",
        "cancelled": "已取消",
        "refunded": "已退款",
    },
    "en": {
        "pending": "Awaiting payment",
        "paid": "Paid, waiting to ship",
        "shipped": "Shipped",
        "delivered": "Delivered",
        "cancelled": "Cancelled",
        "refunded": "Refunded",
    },
}

# Tracking event descriptions; {carrier} and {place} are filled in by the generator.
TRACKING: dict[str, dict[str, str]] = {
    "zh": {
        "created": "商家已下单，等待{carrier}揽收",
        "picked_up": "{carrier}已揽收",
        "departed": "快件已从{place}转运中心发出",
        "arrived": "快件已到达{place}转运中心",
        "out_for_delivery": "快件正在派送中，请保持电话畅通",
        "delivered": "快件已签收，签收人：本人",
        "exception": "派送失败：收件人电话无法接通，将安排再次派送",
    },
    "en": {
        "created": "Shipping label created, awaiting pickup by {carrier}",
        "picked_up": "Picked up by {carrier}",
        "departed": "Departed the {place} sorting centre",
        "arrived": "Arrived at the {place} distribution centre",
        "out_for_delivery": "Out for delivery",
        "delivered": "Delivered, signed for by the recipient",
        "exception": "Delivery attempt failed: recipient unreachable; another attempt is scheduled",
    },
}


def order_status_text(status: str, language: str) -> str:
    return ORDER_STATUS_TEXT.get(language, ORDER_STATUS_TEXT["en"]).get(status, status)
