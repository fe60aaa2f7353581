"""The desk's Knowledge view in headless Chromium, against the real service: an operator uploads
a file and pastes Markdown, finds a passage by searching, deletes the document and sees it gone
from the list and from the results; an agent searches but is offered no upload or delete; a
reply that answered from a document shows its sources in the live session view."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from playwright.async_api import Page, expect

from app.settings import PROJECT_ROOT
from app.testing import LiveService, serve
from tests.api.test_desk import (  # noqa: F401 (backend, browser and page are fixtures)
    OPERATOR,
    backend,
    browser,
    page,
    shot,
    sign_in,
)
from tests.api.test_knowledge import REFUNDS

pytestmark = pytest.mark.asyncio(loop_scope="module")
AGENT = "acme-agent-key-0001"


@pytest_asyncio.fixture(loop_scope="module")
async def svc(make_settings: Any) -> AsyncIterator[LiveService]:
    settings = make_settings(
        auth="api_key",
        api_keys=[f"acme:operator:{OPERATOR}", f"acme:agent:{AGENT}"],
        knowledge_dir="",  # only what the test adds
    )
    async with serve(settings) as service:
        service.client.headers["Authorization"] = f"Bearer {OPERATOR}"
        yield service


async def open_knowledge(page: Page) -> None:  # noqa: F811
    await page.click("#show-knowledge")
    await expect(page.locator("#knowledge")).to_be_visible()
    await expect(page.locator("#desk")).to_be_hidden()


async def search(page: Page, q: str) -> None:  # noqa: F811
    await page.fill("#kb-q", q)
    await page.click("#kb-search button[type=submit]")


async def test_upload_find_delete_and_see_it_gone(
    svc: LiveService,
    page: Page,  # noqa: F811
) -> None:
    await sign_in(page, svc.base_url)
    await open_knowledge(page)
    await expect(page.locator("#kb-list-note")).to_have_text("no documents yet")

    await page.set_input_files(
        "#kb-file",
        files=[{"name": "refunds.md", "mimeType": "text/markdown", "buffer": REFUNDS.encode()}],
    )
    await page.fill("#kb-tags", "refunds, policy")
    await page.click("#kb-submit")
    await expect(page.locator("#kb-add-note")).to_have_text("Refunds: added · 2 passages")
    await page.fill("#kb-title", "Opening hours")
    await page.fill(
        "#kb-text", "# Opening hours\n\nThe hotline is open from 9:00 to 18:00 every day.\n"
    )
    await page.click("#kb-submit")
    await expect(page.locator("#kb-add-note")).to_have_text("Opening hours: added · 1 passage")
    documents = page.locator("#kb-documents li")
    await expect(documents.locator(".title")).to_have_text(["Opening hours", "Refunds"])
    await expect(documents.nth(1).locator(".meta")).to_contain_text("refunds.md · markdown")
    await expect(documents.nth(1).locator(".meta")).to_contain_text("refunds, policy")

    await search(page, "refund times")
    hit = page.locator("#kb-results li").first
    await expect(hit.locator(".title")).to_have_text("Refunds")
    await expect(hit.locator(".section")).to_have_text("Refunds › Refund times")
    await expect(hit.locator(".snippet")).to_contain_text("within 7 working days")
    await expect(hit.locator(".score")).to_have_text("1.00")
    refunds_id = await hit.get_attribute("data-document")
    await shot(page, "desk-knowledge")

    remove = page.locator(f"#kb-documents li[data-document='{refunds_id}'] button.delete")
    await remove.click()
    await expect(remove).to_have_text("Really delete?")
    await remove.click()
    await expect(page.locator("#kb-list-note")).to_have_text("deleted Refunds")
    await expect(documents.locator(".title")).to_have_text(["Opening hours"])
    # The search shown is asked again: the deleted document's passage is gone from it.
    await expect(page.locator("#kb-results li")).to_have_count(0)
    await expect(page.locator("#kb-search-note")).to_have_text(
        "nothing in the knowledge base answers this well enough"
    )
    response = await svc.client.get("/v1/knowledge/search", params={"q": "refund times"})
    assert response.json()["items"] == []
    assert (await svc.client.get(f"/v1/knowledge/documents/{refunds_id}")).status_code == 404

    await page.click("#show-desk")
    await expect(page.locator("#desk")).to_be_visible()
    await expect(page.locator("#knowledge")).to_be_hidden()


async def test_an_agent_searches_but_cannot_add_or_delete(
    svc: LiveService,
    page: Page,  # noqa: F811
) -> None:
    added = await svc.client.post(
        "/v1/knowledge/documents",
        json={"title": "Refund policy", "content": REFUNDS, "format": "markdown"},
    )
    assert added.status_code == 201, added.text
    await page.goto(svc.base_url + "/")
    await page.fill("#api-key", AGENT)
    await page.click("#signin button")
    await expect(page.locator("#who")).to_have_text("acme · agent")
    await open_knowledge(page)
    await expect(page.locator("#kb-add")).to_be_hidden()
    await expect(page.locator("#kb-documents li .title")).to_have_text(["Refund policy"])
    await expect(page.locator("#kb-documents button.delete")).to_have_count(0)
    await search(page, "damaged item")
    await expect(page.locator("#kb-results li .section").first).to_have_text(
        "Refunds › Damaged items"
    )


REFUNDS_EN = PROJECT_ROOT / "data" / "knowledge" / "refunds.en.md"
CREDIT_CARD = "Refunds and how long they take › How long until the money arrives"


async def test_a_reply_shows_the_sources_it_cited_live_and_after_a_reload(
    make_settings: Any,
    page: Page,  # noqa: F811
) -> None:
    settings = make_settings(
        auth="api_key",
        api_keys=[f"acme:operator:{OPERATOR}"],
        knowledge_dir="",
        model="hermes/local",  # it searches the knowledge base and cites what it answers from
        model_api_base=None,
        model_api_key=None,
    )
    async with serve(settings) as svc:
        svc.client.headers["Authorization"] = f"Bearer {OPERATOR}"
        added = await svc.client.post(
            "/v1/knowledge/documents",
            json={
                "title": "Refunds and how long they take",
                "content": REFUNDS_EN.read_text(),
                "format": "markdown",
            },
        )
        assert added.status_code == 201, added.text
        session = await svc.client.post("/v1/sessions", json={"user_id": "cust_0001"})
        session_id = session.json()["id"]

        try:
            await sign_in(page, svc.base_url)
            await page.fill("#open-id", session_id)
            await page.click("#open-form button")
            await expect(page.locator("#stream-state")).to_have_text("live")
            asked = await svc.client.post(
                f"/v1/sessions/{session_id}/messages",
                json={"content": "How long does a refund to a credit card take?"},
            )
            assert asked.status_code == 200, asked.text
            reply = page.locator("#transcript .bubble.bot").last
            await expect(reply.locator(".text")).to_contain_text("7-15 working days")

            async def sees_the_source() -> None:
                source = reply.locator(f".sources .source:has(.section:text-is('{CREDIT_CARD}'))")
                await expect(source.locator(".title")).to_have_text(
                    "Refunds and how long they take"
                )
                await expect(source.locator(".snippet")).to_contain_text(
                    "Credit card: 7-15 working days"
                )

            await sees_the_source()  # live, from message.completed
            await shot(page, "desk-sources")
            await page.reload()
            await expect(page.locator("#who")).to_have_text("acme · operator")
            await page.fill("#open-id", session_id)
            await page.click("#open-form button")
            await sees_the_source()  # from the stored conversation
        finally:  # the page's event stream closed, or the service cannot stop
            await page.goto("about:blank")
