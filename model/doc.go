// Package model is sessiond's client for OpenAI-compatible Chat Completions
// servers (api.openai.com, llama.cpp, vLLM, Ollama, LiteLLM, ...).
//
// # What it owns
//
//   - Translating a [Request] (model name, transcript of [Message]s, [Tool]
//     definitions) into a streamed POST {BaseURL}/chat/completions with
//     stream=true and stream_options.include_usage=true. User, system, tool and
//     assistant content is always sent as a plain JSON string, never as an array
//     of content parts.
//   - Reading the server-sent-event stream, handing every text fragment to the
//     caller as it arrives, and accumulating tool calls and usage into one
//     [Response].
//   - Tolerating the quirks of real servers (the rules below), recorded per
//     server family in testdata/servers and replayed by
//     TestRecordedServerStreams: OpenAI, Azure OpenAI, vLLM, Ollama,
//     llama.cpp, LiteLLM, OpenRouter, Mistral, Groq, Together.
//   - Deciding when a stream is complete: a stream counts as complete only if
//     the server sent a finish_reason or the [DONE] sentinel. Anything else
//     (EOF, reset) is reported as [KindTruncated], never as success. Once a
//     finish_reason arrived, losing the trailing usage chunk or [DONE] is
//     tolerated.
//   - Surfacing every failure as one [*Error] whose [ErrorKind] says what
//     happened and whose Body carries the server's own text (capped at
//     [MaxErrorBody] bytes).
//   - Timeouts and retries on the wire: a connect/response-header timeout, an
//     idle timeout between stream bytes, and retries of 429, 5xx and transport
//     failures that happen before the response stream starts.
//
// The HTTP request building and transport retries are done by
// github.com/openai/openai-go/v3, which also decodes each chunk; the SSE
// framing is read here (servers put errors where openai-go's decoder does
// not look); this package is the adaptation around it.
//
// # Tool-call assembly
//
// Whatever the chunking, one logical call gives one [ToolCall]:
//
//   - A delta whose id is already known continues that call, whatever its
//     index: a server that repeats a call (same id) at a second index does
//     not make a second call. Argument text sent at the second index is
//     appended only if it completes the call's arguments; a complete repeat
//     is not appended twice.
//   - Otherwise a delta continues the current call of its index (the latest
//     call started at that index; with no index, the latest call), unless it
//     opens a new one: it carries an id, the current call already has a
//     different id, and it names a function. So an id arriving late is
//     adopted; an id that changes after the first chunk (later chunks carry
//     no name) is the same call; several calls sharing index 0 (or sending
//     none) are told apart by their ids and names. A delta that repeats the
//     current call's name with a fresh id while that call's arguments are
//     still incomplete JSON continues it (servers that mint an id per
//     chunk). Without ids, a named delta with arguments that follows a call
//     whose arguments are complete JSON starts the next call.
//   - The call keeps the first id the server gave it (calls without any get
//     a generated "call_<16 hex>"). The name is taken once (exact repeats
//     ignored, fragments appended). Arguments may come as string fragments
//     or as a JSON object, whose text is kept as is; empty arguments are
//     reported as "{}".
//
// The agent runs each call at most once per reply, keyed by this id.
//
// # Errors inside a 200 stream
//
// A stream that reports an error fails the call with [KindStreamError] and
// the server's text, never a [Response] with the partial text: a chunk
// with a non-null "error" (OpenAI, Azure, LiteLLM, OpenRouter, Ollama,
// Groq, Together, llama.cpp since late 2025), a chunk with "object":
// "error" (vLLM), an "error" on a choice, a finish_reason that names a
// failure ("error", "abort", or containing error/abort/fail/cancel), an SSE
// "event: error", and a non-standard "error:" field line (llama.cpp
// builds of 2025, which then send [DONE]). "error": null is not an error.
// Text already passed to onDelta stays delivered; what to keep of it is the
// caller's choice (the agent keeps none of it: see docs/protocol.md).
//
// # Content forms
//
// "content" as a string is the text. "content" as a list of typed parts
// (Mistral's reasoning models) is read as its "text" parts joined;
// "thinking", "reasoning" and any other part are dropped. Reasoning sent in
// its own field (reasoning_content from vLLM, llama.cpp and DeepSeek,
// reasoning from OpenRouter and Ollama) is never read. So private
// reasoning never becomes the answer, is never passed to onDelta, and is
// never sent back. Usage is read from "usage" (a usage-only chunk with
// "choices": [], or the finish chunk) or from Groq's "x_groq.usage".
//
// # What it must not do
//
//   - It knows nothing about sessions, admissions, generations, the store or
//     events: a [Client] is a pure function of its [Config] and each [Request].
//   - It never retries after the response stream has started (so a fragment
//     already passed to onDelta is never produced twice), never repairs or
//     rewrites the transcript it is given (that is the agent's job), and
//     never executes tools.
//   - It reads no OPENAI_* environment variables: the daemon resolves base URL
//     and API key and passes them in [Config]. The only environment it honours
//     is the standard proxy configuration (HTTP_PROXY, HTTPS_PROXY, NO_PROXY
//     via [net/http.ProxyFromEnvironment]); loopback base URLs are never
//     proxied.
//   - It does not log. Errors are returned, with enough context to be shown
//     to a person.
package model
