"""The tenant's knowledge documents: add (JSON or a file upload), list, read, delete, search.

Writing needs the operator role, and marking a document `trusted` (its passages are then not
untrusted content for the taint rule) the admin role; agents read and search. A customer key
may do none of it: a customer reaches the knowledge base through a conversation, where the
answer is grounded and cited, never by browsing the documents. Another tenant's document is a
404 `document_not_found`, like a missing one.

A document's size is bounded before it is read: the body limit of this one path is the
knowledge limit (`HERMES_KNOWLEDGE_MAX_DOCUMENT_BYTES`) and a little room for the form's other
fields (`BodyLimitMiddleware` refuses a larger `Content-Length` at once, and stops reading a
body without one when it passes the limit); the document itself is measured again once read.
It is parsed whole before anything is stored, so a refused document leaves nothing behind.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, Query, Request, Response, status
from fastapi.exceptions import RequestValidationError
from pydantic import AfterValidator, BaseModel, Field, ValidationError
from starlette.datastructures import FormData, UploadFile

from app.api.auth import require_role
from app.api.deps import KnowledgeDep, PrincipalDep
from app.api.params import DOCUMENT_CURSOR, DayOrInstant, DocumentId, cursor_query
from app.api.schemas import ErrorResponse, Strict, iso
from app.errors import Forbidden, InvalidDocument, InvalidInput, UnsupportedMediaType
from app.knowledge.gaps import Gap
from app.knowledge.ingest import SUFFIXES, day_start
from app.knowledge.parsing import Format
from app.knowledge.passages import Passage
from app.knowledge.records import Added, Document
from app.knowledge.service import KnowledgeBase
from app.knowledge.snippets import snippet
from app.principal import Principal
from app.settings import KnowledgeSettings
from app.text.labels import clean_label

router = APIRouter(prefix="/v1/knowledge", tags=["knowledge"])

DOCUMENTS_PATH = "/v1/knowledge/documents"
# Room in a request for what comes with the document: the JSON's other fields and quoting, a
# form's other fields and its part headers and boundaries.
FORM_ROOM = 64 * 1024
# Upload media types, for a file whose name has no known suffix.
MEDIA_TYPES: dict[str, Format] = {
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
    "text/html": "html",
    "text/plain": "text",
    "application/pdf": "pdf",
}
MAX_SEARCH = 20  # passages a search answers at most: the top-k setting's own bound
MAX_TITLE = 300

M = TypeVar("M", bound=BaseModel)
Language = Literal["zh", "en"]
# A title or a tag is checked as sent, then cleaned of hidden characters (app/text/labels.py).
# One that was nothing but hidden characters is then empty: a tag says nothing and is dropped,
# a title gives way to the document's own (its first heading, or its source).
MAX_TAG = 64
MAX_TAGS = 20
Tag = Annotated[str, Field(min_length=1, max_length=MAX_TAG), AfterValidator(clean_label)]
Title = Annotated[str, Field(min_length=1, max_length=MAX_TITLE), AfterValidator(clean_label)]
# The upload's tags, comma separated: at most MAX_TAGS, each at most MAX_TAG characters.
FORM_TAGS = rf"^[^,]{{0,{MAX_TAG}}}(,[^,]{{0,{MAX_TAG}}}){{0,{MAX_TAGS - 1}}}$"
# An http(s) URL whose host is a name or an IPv4 address, with an optional port, path, query and
# fragment: "http://[" (an unclosed IPv6 literal) is not a URL any client could open. The path
# has no space, control or other blank character, spelt out: what `\S` leaves out differs
# between the schema's regular expressions (ECMA: U+0085 is not a space) and the validator's.
_URL_BLANK = r"\x00-\x20\x7f-\x9f\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
SOURCE_URL_PATTERN = rf"^https?://[A-Za-z0-9.-]+(:[0-9]{{1,5}})?([/?#][^{_URL_BLANK}]*)?$"
SourceUrl = Annotated[str, Field(min_length=1, max_length=2000, pattern=SOURCE_URL_PATTERN)]

_FORBIDDEN: dict[int | str, dict[str, Any]] = {
    403: {"model": ErrorResponse, "description": "A customer key, or a role that may not"},
}
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "document_not_found: not in this tenant"},
}


def body_limit(settings: KnowledgeSettings) -> int:
    """The request body limit of `POST /v1/knowledge/documents`."""
    return settings.max_document_bytes + FORM_ROOM


class DocumentOut(BaseModel):
    id: str
    source: str = Field(description="Its identity in the tenant: source URL, title or file name")
    title: str
    language: str
    format: str
    tags: list[str]
    source_url: str | None
    version: int = Field(description="1, then one more for each change of the same source")
    valid_from: str | None
    valid_until: str | None
    trusted: bool
    created_by: str = Field(description="`<role>:<key id>` of who sent this version")
    chunk_count: int
    created_at: str
    updated_at: str

    @classmethod
    def of(cls, d: Document) -> DocumentOut:
        return cls(
            id=d.id,
            source=d.source,
            title=d.title,
            language=d.language,
            format=d.format,
            tags=list(d.tags),
            source_url=d.source_url,
            version=d.version,
            valid_from=iso(d.valid_from),
            valid_until=iso(d.valid_until),
            trusted=d.trusted,
            created_by=d.created_by,
            chunk_count=d.chunk_count,
            created_at=iso(d.created_at) or "",
            updated_at=iso(d.updated_at) or "",
        )


class AddedOut(DocumentOut):
    action: Literal["added", "updated", "unchanged"] = Field(
        description="a new document (201), a new version of its source (201), or the same"
        " as stored (200)"
    )

    @classmethod
    def of_added(cls, added: Added) -> AddedOut:
        return cls(**DocumentOut.of(added.document).model_dump(), action=added.action)


class DocumentList(BaseModel):
    items: list[DocumentOut]
    next_cursor: str | None


class Hit(BaseModel):
    document_id: str
    chunk_id: str
    title: str
    section: str = Field(description='The section path, "Returns › Shipping costs"')
    snippet: str = Field(description="The passage around the words that matched, unmasked")
    score: float

    @classmethod
    def of(cls, passage: Passage, query: str) -> Hit:
        return cls(
            document_id=passage.document_id,
            chunk_id=passage.chunk_id,
            title=passage.title,
            section=passage.section,
            snippet=snippet(passage.text, query),
            score=passage.score,
        )


class SearchResults(BaseModel):
    items: list[Hit]


class _Meta(Strict):
    """What a JSON document and an upload both may say about the document."""

    language: Language | None = Field(None, description="Guessed from the text when absent")
    source_url: SourceUrl | None = Field(None, description="Also the document's identity")
    valid_from: DayOrInstant | None = Field(None, description="Not found before (a day: 00:00Z)")
    valid_until: DayOrInstant | None = Field(
        None, description="Not found from (a day: through its end, UTC)"
    )
    trusted: bool = Field(False, description="Admin role only: not untrusted content")


class NewDocument(_Meta):
    # JSON says true or false; only a form's text is read as one ("true", "false").
    trusted: bool = Field(False, strict=True, description="Admin role only: not untrusted content")
    title: Title
    content: str = Field(min_length=1, description="At most the knowledge limit as UTF-8")
    format: Literal["markdown", "html", "text"] = Field(description="PDF by upload only")
    tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)


class UploadFields(_Meta):
    """A multipart upload's fields besides `file`."""

    title: Title | None = None
    format: Literal["markdown", "html", "text", "pdf"] | None = Field(
        None, description="From the file's suffix or media type when absent"
    )
    tags: str | None = Field(
        None,
        max_length=MAX_TAGS * (MAX_TAG + 1),
        pattern=FORM_TAGS,
        description=f"Comma separated: at most {MAX_TAGS}, each at most {MAX_TAG} characters",
    )


def _form_field(schema: dict[str, Any]) -> dict[str, Any]:
    """A field as a form sends it: present with a value, or absent; a form has no null (the
    text "null" would be a value)."""
    field = {k: v for k, v in schema.items() if k != "default" or v is not None}
    kinds = [kind for kind in field.pop("anyOf", []) if kind != {"type": "null"}]
    if len(kinds) == 1:
        return {**field, **kinds[0]}
    return {**field, "anyOf": kinds} if kinds else field


def _upload_schema() -> dict[str, Any]:
    schema = UploadFields.model_json_schema()
    schema["properties"] = {
        "file": {"type": "string", "format": "binary"},
        **{name: _form_field(field) for name, field in schema["properties"].items()},
    }
    schema["required"] = ["file"]
    return schema


_REQUEST_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": NewDocument.model_json_schema()},
            "multipart/form-data": {"schema": _upload_schema()},
        },
    }
}


def _validated(model: type[M], data: bytes | dict[str, Any]) -> M:
    """`data` read as `model`, its errors answered like FastAPI's own (the one error shape)."""
    try:
        if isinstance(data, bytes):
            return model.model_validate_json(data)
        return model.model_validate(data)
    except ValidationError as exc:
        errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]
        raise RequestValidationError(errors) from None


def _bounds(meta: _Meta) -> tuple[float | None, float | None]:
    """The validity as Unix seconds; a day is a whole day in UTC."""
    start = day_start(meta.valid_from)
    end = day_start(meta.valid_until, end=True)
    if start is not None and end is not None and end <= start:
        raise InvalidInput("valid_until must be after valid_from", field="valid_until")
    return start, end


def _uploaded_format(upload: UploadFile, named: Format | None) -> Format:
    if named is not None:
        return named
    name = upload.filename or ""
    suffix = name[name.rfind(".") :].lower() if "." in name else ""
    if suffix in SUFFIXES:
        return SUFFIXES[suffix]
    media = (upload.content_type or "").split(";")[0].strip().lower()
    if media in MEDIA_TYPES:
        return MEDIA_TYPES[media]
    raise InvalidDocument(
        f"unknown file type {suffix or name or media!r}: upload one of"
        f" {', '.join(SUFFIXES)} (or give the format)",
        filename=name,
        content_type=media,
    )


def _file_name(upload: UploadFile) -> str:
    """The upload's name without any folder a browser or a client put before it: the
    document's identity, so cleaned like every label and no longer than a title."""
    name = clean_label((upload.filename or "").replace("\\", "/").rsplit("/", 1)[-1]).strip()
    if len(name) > MAX_TITLE:
        raise InvalidInput(f"the file name is over {MAX_TITLE} characters", field="file")
    return name


async def _add_json(
    request: Request, kb: KnowledgeBase, principal: Principal, created_by: str
) -> Added:
    body = _validated(NewDocument, await request.body())
    _check_trust(principal, body.trusted)
    content = body.content.encode()
    kb.check_size(len(content))
    start, end = _bounds(body)
    return await kb.add(
        principal.tenant_id,
        source=_source(content, body.source_url, body.title),
        content=content,
        format=body.format,
        title=body.title or None,
        language=body.language,
        tags=_said(body.tags),
        source_url=body.source_url,
        valid_from=start,
        valid_until=end,
        trusted=body.trusted,
        created_by=created_by,
    )


async def _add_upload(
    request: Request, kb: KnowledgeBase, principal: Principal, created_by: str
) -> Added:
    form = await request.form(max_files=1, max_fields=len(UploadFields.model_fields))
    try:
        upload, fields = _parts(form)
        meta = _validated(UploadFields, fields)
        _check_trust(principal, meta.trusted)
        format = _uploaded_format(upload, meta.format)
        kb.check_size(upload.size or 0)
        content = await upload.read(kb.settings.max_document_bytes + 1)
    finally:
        await form.close()
    kb.check_size(len(content))
    start, end = _bounds(meta)
    tags = [clean_label(t) for t in (meta.tags or "").split(",")]
    return await kb.add(
        principal.tenant_id,
        source=_source(content, meta.source_url, _file_name(upload), meta.title),
        content=content,
        format=format,
        title=meta.title or None,
        language=meta.language,
        tags=_said(tags),
        source_url=meta.source_url,
        valid_from=start,
        valid_until=end,
        trusted=meta.trusted,
        created_by=created_by,
    )


def _parts(form: FormData) -> tuple[UploadFile, dict[str, Any]]:
    upload = form.get("file")
    if not isinstance(upload, UploadFile):
        raise InvalidInput("a multipart upload needs its document in a file part `file`")
    fields: dict[str, Any] = {}
    for name, value in form.multi_items():
        if name == "file":
            continue
        if not isinstance(value, str):
            raise InvalidInput(f"only `file` may be a file, not {name!r}", field=name)
        fields[name] = value
    return upload, fields


def _said(tags: list[str]) -> list[str]:
    """The tags that say something, trimmed."""
    return [tag.strip() for tag in tags if tag.strip()]


def _source(content: bytes, *names: str | None) -> str:
    """A document's identity: the first of `names` that says something; with none, its
    content's (the same text sent again is the same document)."""
    for name in names:
        if name and name.strip():
            return name.strip()
    return f"untitled-{hashlib.sha256(content).hexdigest()[:16]}"


def _check_trust(principal: Principal, trusted: bool) -> None:
    if trusted and not principal.at_least("admin"):
        raise Forbidden("only an admin may mark a document trusted", role=principal.role)


@router.post(
    "/documents",
    status_code=status.HTTP_201_CREATED,
    response_model=AddedOut,
    responses={
        200: {"model": AddedOut, "description": "The same document as stored: nothing changed"},
        **_FORBIDDEN,
        413: {"model": ErrorResponse, "description": "Over the knowledge limit (5 MiB)"},
        415: {"model": ErrorResponse, "description": "Neither JSON nor a multipart upload"},
    },
    openapi_extra=_REQUEST_BODY,
)
async def add_document(
    request: Request, response: Response, principal: PrincipalDep, kb: KnowledgeDep
) -> AddedOut:
    """A document as JSON (Markdown, HTML or text) or a file upload (also PDF). Its identity is
    its source URL, else its title (an upload: its file name): the same identity with other
    content or metadata is the next version, and the old one's passages leave search at once."""
    require_role(principal, "operator")
    created_by = f"{principal.role}:{principal.subject}"
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media == "application/json":
        added = await _add_json(request, kb, principal, created_by)
    elif media == "multipart/form-data":
        added = await _add_upload(request, kb, principal, created_by)
    else:
        raise UnsupportedMediaType(
            "send the document as application/json or multipart/form-data",
            content_type=media,
        )
    response.status_code = 201 if added.changed else 200
    return AddedOut.of_added(added)


@router.get("/documents", response_model=DocumentList, responses=_FORBIDDEN)
async def list_documents(
    principal: PrincipalDep,
    kb: KnowledgeDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, cursor_query(DOCUMENT_CURSOR)] = None,
) -> DocumentList:
    """The tenant's documents, newest first."""
    require_role(principal, "agent")
    page = await kb.list_documents(principal.tenant_id, cursor=cursor, limit=limit)
    return DocumentList(items=[DocumentOut.of(d) for d in page.items], next_cursor=page.next_cursor)


@router.get(
    "/documents/{document_id}",
    response_model=DocumentOut,
    responses={**_FORBIDDEN, **_NOT_FOUND},
)
async def get_document(
    document_id: DocumentId, principal: PrincipalDep, kb: KnowledgeDep
) -> DocumentOut:
    require_role(principal, "agent")
    return DocumentOut.of(await kb.get(principal.tenant_id, document_id))


@router.delete(
    "/documents/{document_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={**_FORBIDDEN, **_NOT_FOUND},
)
async def delete_document(
    document_id: DocumentId, principal: PrincipalDep, kb: KnowledgeDep
) -> Response:
    """The document and its passages: gone from search when this answers."""
    require_role(principal, "operator")
    await kb.delete(principal.tenant_id, document_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


class GapOut(Strict):
    question: str = Field(description="The customer's words, masked like every stored message")
    reason: Literal["no_answer", "human"] = Field(
        description="no_answer: no passage passed the threshold; human: an agent answered it"
    )
    count: int
    first_seen_at: str | None
    last_seen_at: str | None

    @classmethod
    def of(cls, gap: Gap) -> GapOut:
        return cls(
            question=gap.question,
            reason=gap.reason,
            count=gap.count,
            first_seen_at=iso(gap.first_seen_at),
            last_seen_at=iso(gap.last_seen_at),
        )


class GapList(Strict):
    items: list[GapOut]


@router.get("/gaps", response_model=GapList, responses=_FORBIDDEN)
async def gaps(
    principal: PrincipalDep,
    kb: KnowledgeDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    reason: Annotated[Literal["no_answer", "human"] | None, Query()] = None,
) -> GapList:
    """The questions the documents did not answer, the most asked first: which documents to
    write next."""
    require_role(principal, "operator")
    found = await kb.gaps.top(principal.tenant_id, limit=limit, reason=reason)
    return GapList(items=[GapOut.of(g) for g in found])


@router.get("/search", response_model=SearchResults, responses=_FORBIDDEN)
async def search(
    principal: PrincipalDep,
    kb: KnowledgeDep,
    q: Annotated[str, Query(min_length=1, max_length=500, pattern=r"\S")],
    limit: Annotated[
        int | None, Query(ge=1, le=MAX_SEARCH, description="Default: the top-k setting")
    ] = None,
    language: Annotated[
        Language | None, Query(description="Passages in it first, then the others")
    ] = None,
) -> SearchResults:
    """Passages at or above the score threshold, best first, from documents valid now."""
    require_role(principal, "agent")
    passages = await kb.search(principal.tenant_id, q, language=language, limit=limit)
    return SearchResults(items=[Hit.of(p, q) for p in passages])
