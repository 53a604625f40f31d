"""The wire to a model: one request in, one reply out, with the retry policy shared by providers.

Retry policy (ours, not the SDK's: the SDK is built with ``max_retries=0`` so that the policy is
one piece of code, the same for both providers, and tested against a real socket):
- retried: 408, 409, 429, 500-599 (529 = overloaded), connection errors, timeouts and replies that
  are not the JSON the API promises; the delay is the server's ``retry-after-ms`` / ``retry-after``
  when it gives one (capped), else ``backoff_s`` doubling up to ``max_backoff_s``;
- never retried: 400, 401, 403, 404, 413, 422, and a 429 whose body speaks of quota, credit,
  billing or spend limits (it will not clear by waiting);
- of those, 401 (bad key), 403 (no permission), 404 (unknown model or wrong base URL) and the
  spend-limit 429 cannot heal during a campaign: they raise ``TransportUnavailable``, and the agent
  stops asking. Every other failure is worth another try later: the agent pauses and asks again.
Every attempt runs under its own ``fail_after``; request ids are logged and returned. API keys go
into request headers only and appear in no message or record.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

import anyio
import msgspec
from kernel_scientist.blackboard.config import LLMConfig
from loguru import logger

from ..brain import BrainError, BrainUnavailable

StopReason = Literal["end", "max_tokens", "refusal", "other"]


class LLMRequest(msgspec.Struct, frozen=True):
    model: str
    system: str
    messages: list[dict[str, str]]
    max_tokens: int
    temperature: float | None
    stream: bool = False


class Usage(msgspec.Struct, frozen=True):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


class LLMReply(msgspec.Struct, frozen=True):
    text: str
    stop: StopReason
    stop_reason: str  # the provider's own word
    usage: Usage
    request_id: str = ""
    attempts: int = 1
    wall_s: float = 0.0


class TransportError(BrainError):
    """The server could not be made to answer; ``request_id`` of the last attempt if any."""

    def __init__(self, message: str, request_id: str = "", attempts: int = 0) -> None:
        super().__init__(message)
        self.request_id = request_id
        self.attempts = attempts


class TransportUnavailable(TransportError, BrainUnavailable):
    """The server refused in a way that waiting will not heal (module note)."""


class _Failed(Exception):
    """One failed attempt, classified."""

    def __init__(
        self, message: str, *, retry: bool, after: float | None = None, request_id: str = "", permanent: bool = False
    ) -> None:
        super().__init__(message)
        self.retry, self.after, self.request_id, self.permanent = retry, after, request_id, permanent


_NO_RETRY = {400, 401, 403, 404, 413, 422}
_PERMANENT = {401, 403, 404}
_SPEND = re.compile(r"quota|credit|billing|spend|insufficient|usage limit", re.I)


def classify(status: int, headers: Mapping[str, str], body: str, request_id: str = "") -> _Failed:
    """Turn an HTTP error reply into a retry decision (``headers``: any mapping, lower-case keys ok)."""
    after = retry_after(headers)
    snippet = " ".join(body.split())[:300]
    if status == 429 and _SPEND.search(body):
        return _Failed(
            f"HTTP 429, a spend or quota limit (not retried): {snippet}",
            retry=False,
            request_id=request_id,
            permanent=True,
        )
    retry = status not in _NO_RETRY and (status in (408, 409, 429) or status >= 500)
    hint = {
        401: " (check the API key variable named by llm.api_key_env)",
        403: " (the key lacks permission for this model)",
        404: " (check llm.model and llm.base_url)",
    }.get(status, "")
    return _Failed(
        f"HTTP {status}{hint}: {snippet}",
        retry=retry,
        after=after,
        request_id=request_id,
        permanent=status in _PERMANENT,
    )


def retry_after(headers: Mapping[str, str]) -> float | None:
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return float(ms) / 1000
        value = headers.get("retry-after")
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None  # an HTTP date or garbage: fall back to our own backoff


async def with_retries(cfg: LLMConfig, attempt: Callable[[], Awaitable[LLMReply]], what: str) -> LLMReply:
    """Run ``attempt`` under the retry policy (module note); raise TransportError when it gives up."""
    start = time.perf_counter()
    last: _Failed | None = None
    for n in range(1, cfg.max_retries + 2):
        try:
            with anyio.fail_after(cfg.timeout_s):
                reply = await attempt()
            logger.bind(agent="llm").debug("{} answered (request {}, attempt {})", what, reply.request_id, n)
            return msgspec.structs.replace(reply, attempts=n, wall_s=time.perf_counter() - start)
        except TimeoutError:
            last = _Failed(f"no answer within llm.timeout_s = {cfg.timeout_s:g} s", retry=True)
        except _Failed as exc:
            last = exc
        logger.bind(agent="llm").warning("{} attempt {} failed (request {}): {}", what, n, last.request_id or "-", last)
        if not last.retry or n > cfg.max_retries:
            break
        delay = last.after if last.after is not None else cfg.backoff_s * 2 ** (n - 1)
        await anyio.sleep(min(max(delay, 0.0), cfg.max_backoff_s))
    assert last is not None
    tries = f"after {n} attempt{'s' if n > 1 else ''}"
    error = TransportUnavailable if last.permanent else TransportError
    raise error(f"{what}: {last} ({tries})", request_id=last.request_id, attempts=n)


Send = Callable[[LLMRequest], Awaitable[LLMReply]]


# ---- Anthropic: the official async SDK ----------------------------------------------------------
def anthropic_sender(cfg: LLMConfig, api_key: str) -> Send:
    import anthropic  # imported lazily: about 1.5 s, and only LLM campaigns need it

    async def send(req: LLMRequest) -> LLMReply:
        client = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=cfg.base_url or None, max_retries=0, timeout=cfg.timeout_s
        )
        # The system prompt and the stage's instructions are the stable prefix: cache them.
        # This SDK's create() has no temperature argument: it goes in the body when configured.
        extra = {"temperature": req.temperature} if req.temperature is not None else None
        kwargs: dict[str, Any] = dict(
            model=req.model,
            max_tokens=req.max_tokens,
            extra_body=extra,
            system=[{"type": "text", "text": req.system, "cache_control": {"type": "ephemeral"}}],
            messages=req.messages,
        )

        async def attempt() -> LLMReply:
            try:
                if req.stream:  # long answers: the API wants streaming past a few minutes
                    async with client.messages.stream(**kwargs) as stream:
                        message = await stream.get_final_message()
                        request_id = stream.request_id or ""
                else:
                    message = await client.messages.create(**kwargs)
                    request_id = getattr(message, "_request_id", None) or ""  # set by the SDK's client, not a field
            except anthropic.APIStatusError as exc:
                raise classify(exc.status_code, exc.response.headers, exc.response.text, exc.request_id or "") from None
            except anthropic.APITimeoutError:
                raise _Failed("the request timed out", retry=True) from None
            except anthropic.APIConnectionError as exc:
                raise _Failed(f"connection failed: {exc.__cause__ or exc}", retry=True) from None
            except (anthropic.APIResponseValidationError, ValueError) as exc:
                raise _Failed(f"the reply was not the JSON the API promises: {str(exc)[:200]}", retry=True) from None
            text = "".join(block.text for block in message.content if isinstance(block, anthropic.types.TextBlock))
            u = message.usage
            usage = Usage(
                input_tokens=u.input_tokens or 0,
                output_tokens=u.output_tokens or 0,
                cache_read_tokens=u.cache_read_input_tokens or 0,
                cache_write_tokens=u.cache_creation_input_tokens or 0,
            )
            stops: dict[str, StopReason] = {
                "end_turn": "end",
                "stop_sequence": "end",
                "max_tokens": "max_tokens",
                "refusal": "refusal",
            }
            stop = stops.get(message.stop_reason or "", "other")
            return LLMReply(
                text=text, stop=stop, stop_reason=message.stop_reason or "", usage=usage, request_id=request_id
            )

        try:
            return await with_retries(cfg, attempt, f"{req.model}")
        finally:
            await client.close()

    return send


# ---- OpenAI-compatible Chat Completions (vLLM, llama.cpp, Ollama) -------------------------------
class _ChatMessage(msgspec.Struct):
    content: str | None = None
    refusal: str | None = None


class _ChatChoice(msgspec.Struct):
    message: _ChatMessage
    finish_reason: str | None = None


class _CachedTokens(msgspec.Struct, frozen=True):
    cached_tokens: int | None = 0


class _ChatUsage(msgspec.Struct, frozen=True):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_tokens_details: _CachedTokens | None = None


class _ChatReply(msgspec.Struct):
    choices: list[_ChatChoice]
    id: str = ""
    usage: _ChatUsage = _ChatUsage()


def openai_sender(cfg: LLMConfig, api_key: str) -> Send:
    import httpx2

    url = cfg.base_url.rstrip("/") + "/chat/completions"
    headers = {"content-type": "application/json"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"

    async def send(req: LLMRequest) -> LLMReply:
        fields = {
            "model": req.model,
            "max_tokens": req.max_tokens,
            "messages": [{"role": "system", "content": req.system}, *req.messages],
        }
        if req.temperature is not None:
            fields["temperature"] = req.temperature
        body = msgspec.json.encode(fields)
        async with httpx2.AsyncClient(timeout=cfg.timeout_s) as client:

            async def attempt() -> LLMReply:
                try:
                    resp = await client.post(url, content=body, headers=headers)
                except httpx2.TimeoutException:
                    raise _Failed("the request timed out", retry=True) from None
                except httpx2.TransportError as exc:
                    raise _Failed(f"connection failed: {exc!r}", retry=True) from None
                request_id = resp.headers.get("x-request-id", "")
                if resp.status_code >= 400:
                    raise classify(resp.status_code, resp.headers, resp.text, request_id)
                try:
                    reply = msgspec.json.decode(resp.content, type=_ChatReply)
                except msgspec.DecodeError as exc:
                    raise _Failed(
                        f"the reply was not the JSON the API promises: {exc}", retry=True, request_id=request_id
                    ) from None
                if not reply.choices:
                    raise _Failed("the reply has no choices", retry=True, request_id=request_id)
                choice = reply.choices[0]
                finish = choice.finish_reason or ""
                refused = bool(choice.message.refusal) or finish == "content_filter"
                finishes: dict[str, StopReason] = {"stop": "end", "length": "max_tokens"}
                stop: StopReason = "refusal" if refused else finishes.get(finish, "other")
                cached = (
                    (reply.usage.prompt_tokens_details.cached_tokens or 0) if reply.usage.prompt_tokens_details else 0
                )
                usage = Usage(
                    input_tokens=reply.usage.prompt_tokens - cached,
                    output_tokens=reply.usage.completion_tokens,
                    cache_read_tokens=cached,
                )
                return LLMReply(
                    text=choice.message.content or choice.message.refusal or "",
                    stop=stop,
                    stop_reason=finish,
                    usage=usage,
                    request_id=request_id or reply.id,
                )

            return await with_retries(cfg, attempt, f"{req.model}")

    return send
