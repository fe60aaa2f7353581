"""Every sentence the offline model can say, in Chinese and English.

Result templates are lists of segments; a segment is dropped when a value it names is missing
in the tool's data, so a reply never shows an empty field and never invents one.
"""

from __future__ import annotations

from typing import Literal

Lang = Literal["zh", "en"]
Text = dict[Lang, str]

GREETING: Text = {
    "zh": "您好！我是智能客服，可以帮您查询订单和物流、办理退款退货、重置密码、更新联系方式或"
    "登记投诉。请问有什么可以帮您？",
    "en": "Hello! I can check orders and deliveries, handle refunds and returns, reset your "
    "password, update your contact details or log a complaint. How can I help?",
}

GOODBYE: Text = {
    "zh": "感谢您的咨询，祝您生活愉快，再见！",
    "en": "Thank you for contacting us. Have a good day, goodbye!",
}

HANDOFF: dict[str, Text] = {
    "human_handoff": {
        "zh": "好的，我这就为您转接人工客服，请稍候。",
        "en": "Of course. I'm passing you to a human agent now; please hold on.",
    },
    "out_of_scope": {
        "zh": "抱歉，这个问题超出了我能处理的范围。我可以为您转接人工客服，由同事进一步帮您。",
        "en": "Sorry, that is outside what I can handle. I can pass you to a human agent who "
        "can help further.",
    },
    "low_confidence": {
        "zh": "抱歉，我没有完全理解您的意思。您可以换个说法再试一次，或者我为您转接人工客服。",
        "en": "Sorry, I didn't quite understand. Could you rephrase that? Or I can pass you to "
        "a human agent.",
    },
    "tool_not_offered": {
        "zh": "抱歉，这项业务我目前无法直接办理。我可以为您转接人工客服继续处理。",
        "en": "Sorry, I can't handle this request myself right now. I can pass you to a human "
        "agent who can.",
    },
}

# How the runtime's read-back of a call to confirm begins (app/tools/policy/confirm.py QUESTION,
# a layer above): the customer's answer to it runs that call, whose result the reply is about.
READBACK_OPENINGS = ("请确认：", "Please confirm:")

# A question about a rule with nothing to answer it from (app/llm/local/knowledge.py): no
# guess, the offer of a colleague.
POLICY_UNKNOWN: Text = {
    "zh": "抱歉，这方面的信息我手头暂时没有，不想给您不准确的答复。需要我为您转接人工客服吗？",
    "en": "I'm sorry, I don't have that information to hand, and I'd rather not guess. "
    "Shall I get a colleague to help you?",
}

# A policy answer: the passage's own words, then where they come from (app/llm/local/knowledge.py).
POLICY_ANSWER: dict[str, Text] = {
    "same": {
        "zh": "{words}（来源：《{source}》）",
        "en": "{words} (Source: {source})",
    },
    "other": {
        "zh": "我们的英文文档《{source}》中写道：{words}",
        "en": 'Our Chinese document "{source}" says: {words}',
    },
}

# Memory: the service stores and forgets; these only answer the customer (app/llm/local/memory.py).
REMEMBERED: Text = {"zh": "好的，我记住了：{note}。", "en": "Got it, I'll remember that {note}."}
# "记住这个" with nothing to remember: nothing was stored, so ask rather than claim it was.
REMEMBERED_BARE: Text = {
    "zh": "好的，请告诉我需要记住的内容。",
    "en": "Sure. What would you like me to remember?",
}
FORGOTTEN: Text = {
    "zh": "好的，已经删除了，我不会再记着这条信息。",
    "en": "Done: I've deleted that and won't keep it.",
}
NOTHING_TO_FORGET: Text = {
    "zh": "我这里没有需要删除的相关记录。",
    "en": "I don't have anything stored about that to delete.",
}
# "还记得我什么时候方便接电话吗？": a note the customer asked us to remember, read back to them.
# Memory may be outdated (the recall block says so), hence the question.
NOTE_RECALLED: Text = {
    "zh": "我这里有您之前让我记下的：{note}。现在还是这样吗？",
    "en": "I have a note from an earlier conversation: {note}. Is that still right?",
}
# A recalled preference used where it matters: the courier when a return is created. "We have
# on record", not "you told us": an operator may have recorded it.
COURIER_FOR_RETURN: Text = {
    "zh": "我们记录到您偏好{courier}，寄回时可以选用{courier}。",
    "en": "We have on record that you prefer {courier}, so you can send the return with {courier}.",
}
# A stated preference of the closed vocabulary ("我喜欢顺丰，以后寄件都用顺丰", "以后都用简体中文
# 跟我沟通"): the service stores it (docs/memory.md); the reply says so, not "didn't understand".
PREFERENCE_NOTED: dict[str, Text] = {
    "preference.courier": {
        "zh": "好的，已记下您的快递偏好：{value}。",
        "en": "Noted: you prefer {value} as your courier.",
    },
    "preference.language": {
        "zh": "好的，已记下：以后用{value}和您沟通。",
        "en": "Noted: we'll use {value} with you from now on.",
    },
    "preference.invoice_format": {
        "zh": "好的，已记下您的发票格式偏好：{value}。",
        "en": "Noted: you prefer {value} invoices.",
    },
    "preference.contact_channel": {
        "zh": "好的，已记下：以后优先通过{value}联系您。",
        "en": "Noted: we'll contact you by {value} where we can.",
    },
}
# Closed-vocabulary values as English names them (the courier names are the demo world's).
VALUE_NAMES_EN: dict[str, str] = {
    "简体中文": "Simplified Chinese",
    "繁体中文": "Traditional Chinese",
    "中文": "Chinese",
    "纸质": "paper",
    "电子": "electronic",
    "短信": "text message",
    "电话": "phone",
    "微信": "WeChat",
}
# Couriers by the memory lexicon's canonical value, as the customer's language names them (the
# demo world's carrier names in English); a courier without an English name keeps its own.
COURIER_NAMES_EN: dict[str, str] = {
    "顺丰": "SF Express",
    "京东物流": "JD Logistics",
    "中通": "ZTO Express",
    "圆通": "YTO Express",
    "申通": "STO Express",
    "韵达": "Yunda Express",
}


def courier_name(canonical: str, lang: Lang) -> str:
    return COURIER_NAMES_EN.get(canonical, canonical) if lang == "en" else canonical


def value_name(canonical: str, lang: Lang) -> str:
    """A closed-vocabulary value (courier, language, format, channel) in the reply's language."""
    if lang == "zh":
        return canonical
    return COURIER_NAMES_EN.get(canonical) or VALUE_NAMES_EN.get(canonical, canonical)


# intent -> slot -> question. The slot keys are the ones `asked_slot` recognises.
ASK: dict[str, dict[str, Text]] = {
    "order_status": {
        "order_id": {
            "zh": "好的，请提供您的订单号（12位数字）。",
            "en": "Sure. Could you give me your order number (12 digits)?",
        },
    },
    "track_shipment": {
        "tracking_or_order": {
            "zh": "好的，请提供快递单号或订单号。",
            "en": "Sure. Could you give me the tracking number or the order number?",
        },
    },
    "refund_request": {
        "order_id": {
            "zh": "请提供需要退款的订单号（12位数字）。",
            "en": "Which order should be refunded? Please give me the order number (12 digits).",
        },
    },
    "return_request": {
        "order_id": {
            "zh": "请提供需要退货的订单号（12位数字）。",
            "en": "Which order would you like to return? Please give me the order number "
            "(12 digits).",
        },
    },
    "password_reset": {
        "phone": {
            "zh": "请提供您账户绑定的手机号，我会把重置链接发送到这个号码。",
            "en": "Please give me the mobile number on your account; I'll send the reset link "
            "there.",
        },
    },
    "complaint": {
        "summary": {
            "zh": "很抱歉给您带来不便。请具体描述一下遇到的问题，我来为您登记。",
            "en": "I'm sorry about that. Could you describe the problem in a few words so I can "
            "log it?",
        },
    },
    "update_contact": {
        "contact_field": {
            "zh": "您想更新哪项联系方式：手机号、邮箱还是地址？",
            "en": "Which contact detail would you like to update: phone, email or address?",
        },
        "phone": {"zh": "请提供新的手机号。", "en": "What is the new phone number?"},
        "email": {"zh": "请提供新的邮箱地址。", "en": "What is the new email address?"},
        "address": {"zh": "请提供新的地址。", "en": "What is the new address?"},
    },
    "email_request": {
        "email": {
            "zh": "好的，请问要发送到哪个邮箱地址？",
            "en": "Sure. Which email address should I send it to?",
        },
    },
}

ORDER_STATUS: dict[str, Text] = {
    "pending": {"zh": "待付款", "en": "awaiting payment"},
    "paid": {"zh": "已付款，等待发货", "en": "paid and waiting to be shipped"},
    "shipped": {"zh": "已发货", "en": "shipped"},
    "delivered": {"zh": "已签收", "en": "delivered"},
    "cancelled": {"zh": "已取消", "en": "cancelled"},
    "refunded": {"zh": "已退款", "en": "refunded"},
}

SHIPMENT_STATUS: dict[str, Text] = {
    "created": {"zh": "已创建运单，等待揽收", "en": "label created, awaiting pickup"},
    "in_transit": {"zh": "运输中", "en": "in transit"},
    "out_for_delivery": {"zh": "派送中", "en": "out for delivery"},
    "delivered": {"zh": "已签收", "en": "delivered"},
    "exception": {"zh": "配送异常", "en": "held up by a delivery exception"},
}

REFUND_STATUS: dict[str, Text] = {
    "pending_review": {
        "zh": "待人工审核（金额超过500需人工审批）",
        "en": "pending review (amounts above 500 need a person's approval)",
    },
    "approved": {"zh": "已批准", "en": "approved"},
}
# A refund above 500 an operator approved in this conversation: it was submitted and now waits
# for the finance review (the demo's `pending_review`), not for someone's approval.
REFUND_APPROVED_STATUS: dict[str, Text] = {
    "pending_review": {
        "zh": "已由同事审批通过并提交，正在等待财务审核",
        "en": "approved by a colleague and submitted; it is now with the finance team for review",
    },
    "approved": {"zh": "已由同事审批通过", "en": "approved by a colleague"},
}

# A refund the customer asks about again: the conversation already filed it, so it is not
# filed twice; the reply repeats what the tool answered then.
REFUND_FILED: dict[Lang, list[str]] = {
    "zh": [
        "订单 {order_id} 的退款申请 {refund_id} 已经提交过了。",
        "退款金额 {amount}。",
        "当前状态：{status_name}。",
    ],
    "en": [
        "The refund for order {order_id} was already filed, reference {refund_id}.",
        "Amount: {amount}.",
        "Status: {status_name}.",
    ],
}

CONTACT_FIELD: dict[str, Text] = {
    "phone": {"zh": "手机号", "en": "phone number"},
    "email": {"zh": "邮箱", "en": "email address"},
    "address": {"zh": "地址", "en": "address"},
}

# intent -> outcome -> segments. Outcomes: success, not_found, invalid, error (the tool could
# not answer now), refused (a business rule said no), fallback.
RESULT: dict[str, dict[str, dict[Lang, list[str]]]] = {
    "order_status": {
        "success": {
            "zh": [
                "您的订单 {order_id} 当前状态：{status_name}。",
                "商品：{items}。",
                "合计 {total_amount}。",
                "物流：{carrier}，运单号 {tracking_number}。",
            ],
            "en": [
                "Your order {order_id} is {status_name}.",
                "Items: {items}.",
                "Total {total_amount}.",
                "Carrier: {carrier}, tracking number {tracking_number}.",
            ],
        },
        "not_found": {
            "zh": ["没有找到订单 {order_id}，请核对订单号后再告诉我。"],
            "en": ["I couldn't find order {order_id}. Could you check the order number?"],
        },
    },
    "track_shipment": {
        "success": {
            "zh": [
                "您的包裹（{carrier} {tracking_number}）当前状态：{status_name}。",
                "最新动态：{event}。",
                "预计送达：{estimated_delivery}。",
            ],
            "en": [
                "Your parcel ({carrier} {tracking_number}) is {status_name}.",
                "Latest update: {event}.",
                "Estimated delivery: {estimated_delivery}.",
            ],
        },
        "not_found": {
            "zh": ["没有找到运单 {tracking_number}，请核对快递单号。"],
            "en": ["I couldn't find tracking number {tracking_number}. Could you check it?"],
        },
    },
    "refund_request": {
        "success": {
            "zh": [
                "已为订单 {order_id} 提交退款申请，申请号 {refund_id}。",
                "退款金额 {amount}。",
                "当前状态：{status_name}。",
            ],
            "en": [
                "I've filed a refund for order {order_id}, reference {refund_id}.",
                "Amount: {amount}.",
                "Status: {status_name}.",
            ],
        },
        "not_found": {
            "zh": ["没有找到订单 {order_id}，请核对订单号后再告诉我。"],
            "en": ["I couldn't find order {order_id}. Could you check the order number?"],
        },
    },
    "return_request": {
        "success": {
            "zh": [
                "已为订单 {order_id} 创建退货单 {return_id}。",
                "退货面单：{label_url}。",
            ],
            "en": [
                "I've created return {return_id} for order {order_id}.",
                "Return label: {label_url}.",
            ],
        },
        "not_found": {
            "zh": ["没有找到订单 {order_id}，请核对订单号后再告诉我。"],
            "en": ["I couldn't find order {order_id}. Could you check the order number?"],
        },
    },
    "password_reset": {
        "success": {
            "zh": ["重置密码的链接已通过短信发送到 {masked_phone}，请查收。"],
            "en": ["A password reset link has been sent by SMS to {masked_phone}."],
        },
    },
    "complaint": {
        "success": {
            "zh": ["已为您登记投诉，工单号 {ticket_id}，我们会尽快跟进处理。"],
            "en": ["I've logged your complaint as ticket {ticket_id}; we'll follow up soon."],
        },
    },
    "update_contact": {
        "success": {
            "zh": ["您的{field_name}已更新为 {masked_value}。"],
            "en": ["Your {field_name} has been updated to {masked_value}."],
        },
    },
    "email_request": {
        "success": {
            "zh": ["邮件已发送至 {to}（主题：{subject}），请查收。"],
            "en": [
                "The email has been sent to {to} (subject: {subject}). Please check your inbox."
            ],
        },
        # Wording that asks again for the address, so a corrected one continues the request.
        "invalid": {
            "zh": ["这个邮箱地址好像不对，请核对后再告诉我正确的邮箱地址。"],
            "en": [
                "That email address doesn't look right. Could you check it and send me the "
                "correct email address?"
            ],
        },
        "error": {
            "zh": ["抱歉，邮件暂时无法发送，请稍后再试，或者我为您转接人工客服。"],
            "en": [
                "Sorry, the email can't be sent right now. Please try again later, or I can pass "
                "you to a human agent."
            ],
        },
    },
}

# Error codes worded for one intent; they win over ERROR_CODE and the intent's outcome template.
INTENT_ERROR_CODE: dict[str, dict[str, dict[Lang, list[str]]]] = {
    "refund_request": {
        "approval_rejected": {
            "zh": ["抱歉，同事审核后没有批准订单 {order_id} 的这笔退款，退款没有提交。"],
            "en": [
                "Sorry, a colleague reviewed this refund for order {order_id} and declined it, "
                "so no refund was filed."
            ],
        },
    },
    "email_request": {
        "approval_rejected": {
            "zh": ["抱歉，同事审核后没有批准发送这封邮件，邮件没有发出。"],
            "en": ["Sorry, a colleague reviewed this email and declined it, so it was not sent."],
        },
        "approval_expired": {
            "zh": [
                "这封邮件需要同事审核后才能发出，一直在等待同事确认，但还没有人批准，所以尚未发送。"
                "您可以稍后再试，或者我为您转接人工客服。"
            ],
            "en": [
                "This email needs a colleague's approval before it goes out. It was waiting for a "
                "colleague, but nobody approved it in time, so it hasn't been sent. You can ask "
                "again later, or I can pass you to a human agent."
            ],
        },
        "email_unavailable": {
            "zh": ["邮件服务暂时不可用，邮件没有发出，请稍后再试。"],
            "en": [
                "The email service is unavailable right now, so the email wasn't sent. Please "
                "try again later."
            ],
        },
        "email_rejected": {
            "zh": ["邮件服务器拒收了这封邮件，请核对邮箱地址后再告诉我正确的邮箱地址。"],
            "en": [
                "The mail server refused this email. Could you check the email address and send "
                "me the correct email address?"
            ],
        },
    },
}

# Used when an intent has no template of its own for an outcome.
RESULT_DEFAULT: dict[str, dict[Lang, list[str]]] = {
    "success": {"zh": ["已为您办理完成。"], "en": ["That's done."]},
    "not_found": {
        "zh": ["没有找到相关记录，请核对您提供的信息。"],
        "en": ["I couldn't find a matching record. Could you check the details?"],
    },
    "invalid": {
        "zh": ["您提供的{slot_name}格式好像不对，请核对后再发给我。"],
        "en": [
            "The {slot_name} you gave doesn't look right. Could you check it and send it again?"
        ],
    },
    "error": {
        "zh": ["抱歉，系统暂时无法完成这项操作，请稍后再试，或者我为您转接人工客服。"],
        "en": [
            "Sorry, the system can't complete this right now. Please try again later, or I can "
            "pass you to a human agent."
        ],
    },
    "refused": {
        "zh": ["抱歉，这项请求目前无法办理。如需进一步帮助，我可以为您转接人工客服。"],
        "en": [
            "Sorry, this request can't be carried out. If you need more help, I can pass you to "
            "a human agent."
        ],
    },
    # The tool's own fallback message is an instruction for a model, not for the customer: it
    # is not passed on.
    "fallback": {
        "zh": ["抱歉，暂时无法获取实时信息，请稍后再试，或者我为您转接人工客服。"],
        "en": [
            "Sorry, live information isn't available right now. Please try again later, or I "
            "can pass you to a human agent."
        ],
    },
}

# Refusals by the tools' business rules, by error code (any intent).
ERROR_CODE: dict[str, dict[Lang, list[str]]] = {
    "phone_mismatch": {
        "zh": ["这个手机号与账户绑定的号码不一致。请提供您注册账户时使用的手机号。"],
        "en": [
            "That number doesn't match the one on the account. Could you give me the mobile "
            "number you registered with?"
        ],
    },
    "order_not_paid": {
        "zh": ["订单 {order_id} 还没有付款，无需退款。"],
        "en": ["Order {order_id} hasn't been paid yet, so there is nothing to refund."],
    },
    "order_not_refundable": {
        "zh": ["订单 {order_id} 当前的状态不能再申请退款。"],
        "en": ["Order {order_id} can't be refunded in its current state."],
    },
    "amount_required": {
        "zh": ["订单 {order_id} 金额超过500，需要人工审核。请告诉我需要退款的具体金额。"],
        "en": [
            "Order {order_id} is over 500, so a colleague has to review the refund. How much "
            "should be refunded?"
        ],
    },
    "amount_exceeds_total": {
        "zh": ["退款金额不能超过订单总额。请告诉我一个不超过订单总额的退款金额。"],
        "en": ["A refund can't be more than the order total. What amount should be refunded?"],
    },
    "amount_exceeds_refundable": {
        "zh": [
            "这个订单已有部分金额退款或正在审核，剩余可退金额不足。请告诉我一个更小的退款金额。"
        ],
        "en": [
            "Part of this order has already been refunded or is under review, so less is left "
            "to refund. What smaller amount should be refunded?"
        ],
    },
    "order_not_returnable": {
        "zh": ["只有已签收的订单才能退货，订单 {order_id} 目前还不能退货。"],
        "en": ["Only delivered orders can be returned; order {order_id} isn't delivered yet."],
    },
    "return_already_requested": {
        "zh": ["订单 {order_id} 已经申请过退货，无需重复申请。"],
        "en": ["A return already exists for order {order_id}."],
    },
    "value_unchanged": {
        "zh": ["您的{field_name}已经是这个了，无需修改。"],
        "en": ["Your {field_name} is already set to that."],
    },
    "value_not_allowed": {
        "zh": ["这个{field_name}不能用于您的账户，请提供另一个。"],
        "en": ["That {field_name} can't be used for your account. Could you give me another one?"],
    },
    "approval_rejected": {
        "zh": ["抱歉，这项操作没有通过人工审核，未能办理。"],
        "en": ["Sorry, a colleague declined this request, so it wasn't carried out."],
    },
    "approval_expired": {
        "zh": ["这项操作需要同事审核，但还没有得到确认，因此尚未办理。"],
        "en": [
            "This needs a colleague's approval and hasn't been confirmed yet, so it hasn't been "
            "carried out."
        ],
    },
}

SLOT_NAME: dict[str, Text] = {
    "order_id": {"zh": "订单号", "en": "order number"},
    "tracking_number": {"zh": "快递单号", "en": "tracking number"},
    "phone": {"zh": "手机号", "en": "phone number"},
    "value": {"zh": "联系方式", "en": "contact detail"},
    "amount": {"zh": "金额", "en": "amount"},
    "to": {"zh": "邮箱地址", "en": "email address"},
}
