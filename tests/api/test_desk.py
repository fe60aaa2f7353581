"""The desk page (app/api/static/desk/) driven in headless Chromium, against the real service.

Debian's `chromium` (installed by `make test` when missing) through Playwright, one browser for
the module. The service is signed into as an operator, the fake model streams over HTTP, and the
customer test-chat pane follows its session with a stream token, as a customer's page would.
With DESK_SCREENSHOTS=docs/desk the tests also write the pictures docs/desk.md shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from playwright.async_api import Browser, Page, async_playwright, expect

from app.demo.fixtures import LI_LEI, LI_LEI_EMAIL, LI_LEI_PHONE
from app.demo.testing import SmtpSink
from app.llm.testing import FakeLLMServer, Gate, Reply, ToolCall, ToolCalls
from app.testing import LiveService, read_events, serve

pytestmark = pytest.mark.asyncio(loop_scope="module")
expect.set_options(timeout=10_000)  # a shared 2-core CI machine is sometimes slow

CHROMIUM = "/usr/bin/chromium"
OPERATOR = "acme-operator-key-1"
SHOTS = os.environ.get("DESK_SCREENSHOTS")
if SHOTS:
    Path(SHOTS).mkdir(parents=True, exist_ok=True)
WAIT_MS = 15_000


@pytest.fixture
def backend() -> str:
    # The browser drives the page, not the store: the API suites cover both engines.
    return "sqlite"


@pytest.fixture
def sink() -> Iterator[SmtpSink]:
    with SmtpSink() as server:
        yield server


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    assert await asyncio.to_thread(Path(CHROMIUM).exists), (
        "chromium is missing: `make test` installs it (apt-get)"
    )
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox"], headless=True
        )
        yield launched
        await launched.close()


@pytest_asyncio.fixture(loop_scope="module")
async def svc(make_settings: Any, sink: SmtpSink) -> AsyncIterator[LiveService]:
    settings = make_settings(
        auth="api_key",
        api_keys=[f"acme:operator:{OPERATOR}"],
        smtp_host=sink.host,
        smtp_port=sink.port,
        delta_flush_ms=0,  # one message.delta per streamed piece: the test counts them
    )
    async with serve(settings) as service:
        service.client.headers["Authorization"] = f"Bearer {OPERATOR}"
        yield service


@pytest_asyncio.fixture(loop_scope="module")
async def page(browser: Browser) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport={"width": 1360, "height": 760})
    opened = await context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    await context.close()
    assert errors == [], f"the page threw: {errors}"


async def sign_in(page: Page, base_url: str) -> None:
    await page.goto(base_url + "/")
    await page.fill("#api-key", OPERATOR)
    await page.click("#signin button")
    await expect(page.locator("#who")).to_have_text("acme · operator")


async def start_chat(page: Page) -> str:
    """A new customer chat in the test pane, opened in the desk's session view too."""
    await page.click("#chat-start button[type=submit]")
    await expect(page.locator("#chat-state")).to_have_text("live", timeout=WAIT_MS)
    session_id = await page.locator("#chat").get_attribute("data-session")
    assert session_id
    await page.click("#chat-open")
    await expect(page.locator("#session-id")).to_have_text(session_id)
    await expect(page.locator("#stream-state")).to_have_text("live", timeout=WAIT_MS)
    return session_id


async def customer_says(page: Page, text: str) -> None:
    await page.fill("#chat-text", text)
    await page.click("#chat-send")


async def until(check: Callable[[], Awaitable[bool] | bool], what: str, within: float = 15) -> None:
    """Wait for an observable condition, with a deadline."""
    async with asyncio.timeout(within):
        while True:
            result = check()
            if await result if isinstance(result, Awaitable) else result:
                return
            await asyncio.sleep(0.02)
    raise AssertionError(what)  # pragma: no cover


async def shot(page: Page, name: str) -> None:
    if SHOTS:
        await page.screenshot(path=str(Path(SHOTS) / f"{name}.png"))


async def stored_events(svc: LiveService, session_id: str) -> list[tuple[int, str]]:
    """The session's events as the service logged them, to its turn's end, over its own API."""
    async with svc.client.stream(
        "GET", f"/v1/sessions/{session_id}/events", params={"after": 0}
    ) as response:
        reader = read_events(response, until="turn.completed")
        return [(int(event.id or 0), event.event) async for event in reader]


async def desk_events(page: Page) -> list[tuple[int, str]]:
    rows = await page.locator("#events li").evaluate_all(
        "items => items.map(li => [Number(li.dataset.seq), li.dataset.type])"
    )
    return [(int(seq), str(kind)) for seq, kind in rows]


REPLY = "Your order 202405201234 has shipped today."


async def test_deltas_appear_in_the_desk_and_the_chat_as_they_stream(
    svc: LiveService, page: Page, fake_llm: FakeLLMServer
) -> None:
    gate = Gate(after=3)
    fake_llm.enqueue(Reply(REPLY, chunks=6, gate=gate))
    await sign_in(page, svc.base_url)
    await start_chat(page)
    await customer_says(page, "where is my order 202405201234")

    desk_bubble = page.locator("#transcript .bubble.bot")
    chat_bubble = page.locator("#chat .bubble.bot")
    await until(lambda: gate.reached, "the model never got to its gate")
    # Half the reply is out and the turn is still running: the page shows that half, live.
    await expect(desk_bubble.locator(".text")).to_have_text(re.compile(r"^Your order"))
    await expect(desk_bubble).to_have_class(re.compile("streaming"))
    partial = await desk_bubble.locator(".text").text_content()
    assert partial and REPLY.startswith(partial) and len(partial) < len(REPLY) / 2 + 2
    await expect(chat_bubble.locator(".text")).to_have_text(partial)
    assert len(await page.locator("#events li[data-type='message.delta']").all()) == 3
    await expect(page.locator("#transcript .bubble.customer")).to_have_text(
        re.compile("where is my order")
    )
    gate.open()
    await expect(desk_bubble.locator(".text")).to_have_text(REPLY)
    await expect(desk_bubble).not_to_have_class(re.compile("streaming"))
    await expect(chat_bubble.locator(".text")).to_have_text(REPLY)
    deltas = [kind for _, kind in await desk_events(page) if kind == "message.delta"]
    assert len(deltas) == 6
    await expect(page.locator("#steps li").first).to_be_visible()
    await shot(page, "desk-live")


async def test_an_operator_approves_a_call_seeing_its_real_arguments(
    svc: LiveService, page: Page, fake_llm: FakeLLMServer, sink: SmtpSink
) -> None:
    body = f"We will call you back on {LI_LEI_PHONE} today."
    arguments = {"to": LI_LEI_EMAIL, "subject": "Your call-back", "body": body}
    fake_llm.enqueue(ToolCalls(ToolCall("send_email", arguments)), Reply("I have emailed you."))
    await sign_in(page, svc.base_url)
    await page.fill("#chat-user", LI_LEI)
    await start_chat(page)
    await customer_says(page, "please email me when you will call")

    card = page.locator("#approvals .approval")
    await expect(card).to_have_attribute("data-status", "pending", timeout=WAIT_MS)
    masked = card.locator("pre").first
    await expect(masked).to_contain_text("l***@example.com")
    await expect(masked).not_to_contain_text(LI_LEI_PHONE)
    # The operator sees what will really be sent, unmasked.
    await expect(card.locator(".full pre")).to_contain_text(LI_LEI_EMAIL)
    await expect(card.locator(".full pre")).to_contain_text(LI_LEI_PHONE)
    assert sink.received() == []
    await shot(page, "desk-approval")
    await card.locator("button.approve").click()

    await expect(card.locator(".status")).to_have_text("approved")
    await expect(page.locator("#tools li")).to_contain_text("send_email")
    await expect(page.locator("#tools li")).to_contain_text("success")
    await expect(page.locator("#chat .bubble.bot").last).to_have_text(
        re.compile("I have emailed you.")
    )
    [mail] = sink.received()
    assert LI_LEI_PHONE in str(mail)


async def test_an_agent_takes_over_the_bot_stays_silent_and_answers_again_after(
    svc: LiveService, page: Page, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(Reply("Let me look into that."))
    await sign_in(page, svc.base_url)
    session_id = await start_chat(page)
    await customer_says(page, "my refund never arrived")
    await expect(page.locator("#chat .bubble.bot")).to_have_count(1, timeout=WAIT_MS)
    calls = len(fake_llm.requests)

    await page.click("#claim")
    await expect(page.locator("#handoff-state")).to_have_text(re.compile("claimed"))
    await expect(page.locator("#queue li.claimed")).to_have_count(1, timeout=WAIT_MS)
    bot_lines = await page.locator("#chat .bubble.bot").count()  # with the queue notice
    await customer_says(page, "is anyone there?")
    # The desk gets the customer's words; the bot says nothing, the model is not asked.
    await expect(page.locator("#transcript .bubble.customer").last).to_have_text(
        re.compile("is anyone there")
    )
    await page.fill("#agent-text", "Hello, this is Anna from customer care.")
    await page.click("#agent-send")
    human = page.locator("#chat .bubble.agent")
    await expect(human).to_have_text(re.compile("Hello, this is Anna"))
    await expect(human.locator(".who")).to_have_text("Agent (human)")
    assert await page.locator("#chat .bubble.bot").count() == bot_lines
    assert len(fake_llm.requests) == calls

    # Agent assist: a draft, edited, then sent; never sent on its own.
    fake_llm.enqueue(Reply("I can see the refund; it was sent on Monday."))
    await page.click("#suggest")
    draft = page.locator("#suggestions .suggestion")
    await expect(draft).to_contain_text("it was sent on Monday")
    await expect(page.locator("#chat .bubble.agent")).to_have_count(1)
    await shot(page, "desk-takeover")
    await draft.locator("button.edit").click()
    await expect(page.locator("#agent-text")).to_have_value(re.compile("sent on Monday"))
    await page.fill("#agent-text", "I can see the refund; it was sent on Monday, 3 June.")
    await page.click("#agent-send")
    await expect(page.locator("#chat .bubble.agent").last).to_have_text(re.compile("3 June"))
    messages = (await svc.client.get(f"/v1/sessions/{session_id}/messages")).json()["items"]
    sent = [m for m in messages if "3 June" in (m["content"] or "")]
    assert len(sent) == 1 and sent[0]["metadata"].get("suggestion_id")

    await page.click("#release")
    await expect(page.locator("#handoff-state")).to_have_text(re.compile("released"))
    fake_llm.enqueue(Reply("Glad that is sorted. Anything else?"))
    await customer_says(page, "thanks")
    await expect(page.locator("#chat .bubble.bot").last).to_have_text(
        re.compile("Glad that is sorted"), timeout=WAIT_MS
    )


class DroppingProxy:
    """A TCP proxy in front of the service that can cut every connection at once and refuse
    new ones for a while: the network between the browser and Hermes going away."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.up = True
        self.cut = 0
        self._open: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None
        self.port = 0

    async def __aenter__(self) -> DroppingProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.drop()
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    def drop(self) -> None:
        for writer in list(self._open):
            self.cut += 1
            writer.transport.abort()
        self._open.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.up:
            writer.transport.abort()
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self._open.update((writer, up_writer))

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._open.discard(writer)
        self._open.discard(up_writer)


async def test_a_network_drop_loses_no_event(
    svc: LiveService, page: Page, fake_llm: FakeLLMServer
) -> None:
    port = int(svc.base_url.rsplit(":", 1)[1])
    async with DroppingProxy(port) as proxy:
        gate = Gate(after=2)
        reply = "one two three four five six seven eight nine ten"
        fake_llm.enqueue(Reply(reply, chunks=10, gate=gate))
        await sign_in(page, f"http://127.0.0.1:{proxy.port}")
        session_id = await start_chat(page)
        await customer_says(page, "count to ten")
        await until(lambda: gate.reached, "the model never got to its gate")
        await expect(page.locator("#events li[data-type='message.delta']")).to_have_count(2)

        proxy.up = False
        proxy.drop()  # every connection, the event streams with them
        await expect(page.locator("#stream-state")).to_have_text("reconnecting")
        gate.open()  # the rest of the turn happens while the desk is cut off
        async with httpx.AsyncClient(base_url=svc.base_url, headers=svc.client.headers) as api:
            await until(lambda: _turn_done(api, session_id), "the turn never finished", within=20)
        cut_off = await page.locator("#transcript .bubble.bot .text").text_content()
        assert cut_off and reply.startswith(cut_off) and len(cut_off) < len(reply) / 2
        proxy.up = True

        await expect(page.locator("#stream-state")).to_have_text("live", timeout=WAIT_MS)
        await expect(page.locator("#transcript .bubble.bot .text")).to_have_text(reply)
        expected = await stored_events(svc, session_id)
        assert expected[-1][1] == "turn.completed"
        await until(lambda: _desk_has(page, len(expected)), "the desk never caught up", within=15)
        shown = await desk_events(page)
        seqs = [seq for seq, _type in shown]
        assert seqs == sorted(set(seqs))  # each once, in order
        assert [e for e in shown if e in expected] == expected  # none missing
        # The rest it saw live before the drop; the turn's end deleted them from the log.
        seen_live = {kind for seq, kind in shown if (seq, kind) not in expected}
        assert seen_live <= {"message.delta", "step.updated", "tool.started"}
        assert await page.locator("#chat .bubble.bot .text").text_content() == reply
        assert proxy.cut > 0


async def _turn_done(api: httpx.AsyncClient, session_id: str) -> bool:
    items = (await api.get(f"/v1/sessions/{session_id}/messages")).json()["items"]
    return any(m["role"] == "assistant" and m["content"] for m in items)


async def _desk_has(page: Page, count: int) -> bool:
    return await page.locator("#events li").count() >= count


async def _desk_cookie(page: Page) -> str:
    [cookie] = [c["value"] for c in await page.context.cookies() if c["name"] == "hermes_desk"]
    return cookie


async def test_signing_out_ends_the_sign_in_and_an_ended_one_shows_the_form_again(
    svc: LiveService, page: Page
) -> None:
    await sign_in(page, svc.base_url)
    signed_out_cookie = await _desk_cookie(page)
    await page.click("#signout")
    await expect(page.locator("#signin")).to_be_visible()
    await expect(page.locator("#desk")).to_be_hidden()
    # A copy of the cookie taken before is refused: the sign-in itself is gone.
    async with httpx.AsyncClient(base_url=svc.base_url) as kept:
        stale = await kept.get(
            "/v1/sessions", headers={"Cookie": f"hermes_desk={signed_out_cookie}"}
        )
        assert stale.status_code == 401

    # Signed in again, then signed out elsewhere (another tab): the page notices by itself.
    await sign_in(page, svc.base_url)
    cookie = {"Cookie": f"hermes_desk={await _desk_cookie(page)}"}
    async with httpx.AsyncClient(base_url=svc.base_url, headers=cookie) as other_tab:
        csrf = (await other_tab.get("/v1/desk/session")).json()["csrf_token"]
        out = await other_tab.post("/v1/desk/logout", headers={"X-CSRF-Token": csrf})
        assert out.status_code == 204
    await expect(page.locator("#signin-error")).to_contain_text("signed out", timeout=WAIT_MS)
    await expect(page.locator("#signin")).to_be_visible()
    await expect(page.locator("#desk")).to_be_hidden()
