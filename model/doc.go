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
//   - Tolerating the quirks of real servers: several tool calls that share
//     index 0 (or carry no index) but have distinct ids, a trailing chunk with
//     an empty choices array that only carries usage, a stream that ends with
//     [DONE] but never states a finish_reason, and tool calls without ids.
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
// The HTTP request building, transport retries and SSE framing are done by
// github.com/openai/openai-go/v3; this package is the adaptation around it.
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
