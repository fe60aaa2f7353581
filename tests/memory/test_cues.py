import pytest

from app.memory.cues import is_denial, is_forget_command, needs_recall, recall_reason


@pytest.mark.parametrize(
    "text",
    [
        "还是按上次的来",
        "那个方案现在进度怎样",
        "跟上次一样寄顺丰",
        "我的邮箱你们有吗",
        "Same as before, please",
        "Ship it like last time",
        "use my usual address",
        "as before",
    ],
)
def test_history_references_need_recall(text):
    assert recall_reason(text) == "reference"


def test_intents_that_depend_on_the_user_need_recall():
    assert recall_reason("I want to send this back", "return_request") == "intent"
    assert needs_recall("修改一下联系方式", "update_contact")


def test_topics_memory_holds_need_recall():
    assert recall_reason("发票开好了吗", "order_status") == "topic"


@pytest.mark.parametrize(
    ("text", "intent"),
    [("你好", "greeting"), ("谢谢，再见", "goodbye"), ("我的订单到哪了", "order_status"),
     ("what's the weather", "out_of_scope")],
)  # fmt: skip
def test_small_talk_and_self_contained_questions_do_not(text, intent):
    assert not needs_recall(text, intent)


@pytest.mark.parametrize(
    "text",
    ["忘掉这个", "别记这个", "不要记住这个", "把刚才的忘了", "删除这条记忆", "Forget that.",
     "please forget it", "don't remember that", "Delete that memory"],
)  # fmt: skip
def test_forget_commands(text):
    assert is_forget_command(text)


@pytest.mark.parametrize(
    "text",
    [
        "我忘了密码",
        "I forgot my password",
        "记住我的邮箱",
        "别忘了给我发票",
        "don't forget the invoice",
    ],
)
def test_not_forget_commands(text):
    assert not is_forget_command(text)


def test_denials():
    assert is_denial("不对，不是这个号码")
    assert is_denial("No, that's wrong")
    assert not is_denial("对的，就是这个")
