"""Words a call centre's customers and its documents use for the same thing, in both languages.

A question says "send it back", the policy says "return"; a customer writes "refund 多久到账"
against an English page. Each group below is one thing; a question naming any of its forms
is satisfied by a passage naming any other. These are the shop-floor words of after-sales,
delivery, payment and accounts, not phrases of the demo documents: a call centre with other
documents keeps them, and may add its own groups.
"""

from __future__ import annotations

GROUPS: tuple[tuple[str, ...], ...] = (
    # after-sales
    (
        "return",
        "send back",
        "send it back",
        "take back",
        "ship back",
        "post back",
        "mail back",
        "退货",
        "退回",
        "寄回",
    ),
    ("refund", "money back", "reimburse", "退款", "退钱", "返款"),
    ("exchange", "swap", "replacement", "换货", "更换"),
    ("damaged", "broken", "defective", "faulty", "cracked", "破损", "损坏", "坏了", "质量问题"),
    ("warranty", "guarantee", "repair", "保修", "质保", "维修"),
    ("complaint", "complain", "unhappy", "dissatisfied", "投诉", "不满"),
    ("cancel", "取消", "撤销"),
    ("price protection", "price drop", "price match", "保价", "降价", "差价"),
    # delivery
    (
        "ship",
        "deliver",
        "delivery",
        "send",
        "dispatch",
        "配送",
        "发货",
        "送货",
        "寄送",
        "派送",
        "寄到",
        "寄往",
    ),
    ("shipping fee", "shipping cost", "postage", "delivery charge", "delivery fee", "运费", "邮费"),
    ("free shipping", "包邮", "免运费"),
    ("free", "免费"),
    ("cost", "how much", "price", "fee", "charge", "费用", "多少钱", "价格", "收费"),
    ("region", "area", "country", "地区", "区域"),
    ("hong kong", "香港"),
    ("macau", "macao", "澳门"),
    ("taiwan", "台湾"),
    (
        "abroad",
        "overseas",
        "international",
        "foreign",
        "outside china",
        "海外",
        "国外",
        "境外",
    ),
    # countries a customer may name, each "abroad" to a shop that serves one country
    (
        *("united states", "usa", "america", "canada", "uk", "britain", "australia"),
        *("japan", "korea", "singapore", "germany", "france"),
        *("美国", "加拿大", "英国", "澳大利亚", "日本", "韩国", "新加坡", "德国", "法国"),
    ),
    ("address", "地址"),
    ("courier", "carrier", "express", "快递", "物流"),
    ("parcel", "package", "包裹"),
    # money
    ("pay", "payment", "支付", "付款", "付钱"),
    ("alipay", "支付宝"),
    ("wechat", "weixin", "微信"),
    ("credit card", "信用卡"),
    ("debit card", "bank card", "借记卡", "银行卡"),
    ("cash on delivery", "cod", "货到付款"),
    ("instalment", "installment", "分期"),
    ("invoice", "receipt", "fapiao", "发票"),
    ("vat", "special invoice", "增值税", "专票"),
    ("points", "积分"),
    ("yuan", "cny", "rmb", "人民币", "块钱"),
    ("member", "membership", "会员"),
    ("coupon", "voucher", "discount", "优惠券", "优惠"),
    ("gift card", "礼品卡"),
    # time
    ("how long", "how many days", "how soon", "多久", "多长时间", "几天"),
    ("expire", "expiry", "valid", "过期", "有效期", "失效"),
    (
        "opening hours",
        "open",
        "business hours",
        "营业时间",
        "工作时间",
        "服务时间",
        "几点",
        "开门",
        "上班",
        "下班",
    ),
    ("holiday", "假期", "节假日"),
    (
        *("weekend", "saturday", "sunday", "周末", "周六", "周日"),
        *("星期六", "星期天", "星期日", "礼拜六", "礼拜天"),
    ),
    ("spring festival", "chinese new year", "春节", "过年"),
    # contact and account
    ("hotline", "phone", "call", "telephone", "热线", "电话", "客服电话"),
    ("online chat", "live chat", "chat", "在线客服", "在线"),
    ("email", "e-mail", "mail", "邮件", "邮箱"),
    ("contact", "reach", "联系"),
    ("account", "账户", "账号"),
    ("delete account", "close account", "注销", "删除账户", "删除账号", "删掉账号", "删号"),
    ("password", "密码"),
    ("marketing", "promo", "promotion", "promotional", "newsletter", "营销", "广告", "推广"),
    ("unsubscribe", "opt out", "stop sending", "退订", "取消订阅"),
    ("privacy", "personal data", "personal information", "隐私", "个人信息"),
)

# What answers a question of a group without naming it: "how long" is answered by a duration,
# "how much" by a price. A passage with one of these meets the group (keyed by its first form);
# a question saying one does not name the group ("today" asks no "how long").
ANSWERS: dict[str, tuple[str, ...]] = {
    "how long": (
        *("day", "hour", "minute", "week", "month", "working day"),
        *("天", "小时", "分钟", "工作日", "个月"),
    ),
    "cost": ("cny", "yuan", "rmb", "元"),
    "opening hours": ("am", "pm", "daily", "every day", "每天", "周一"),
    "weekend": ("daily", "every day", "每天", "周一"),  # open every day: weekends too
    "united states": ("abroad", "overseas", "outside china", "海外", "国外", "境外"),
    "yuan": ("元",),
}
