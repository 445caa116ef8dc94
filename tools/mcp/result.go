package mcp

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultResultLimit is FormatResult's limit when given none: the
// terminal's default output limit.
const DefaultResultLimit = 50000

// Result is the tool message of an MCP call as the model reads it (JSON):
// Content holds the text parts and images in the server's order,
// StructuredContent the server's structured result; IsError is the
// server's isError (the tool failed; the call itself worked). Truncated
// says something was cut to the limit: TotalBytes counts the text and
// image bytes the server sent.
type Result struct {
	Server            string          `json:"server"`
	Tool              string          `json:"tool"`
	IsError           bool            `json:"is_error"`
	Content           []ResultPart    `json:"content"`
	StructuredContent json.RawMessage `json:"structured_content,omitempty"`
	Truncated         bool            `json:"truncated"`
	TotalBytes        int             `json:"total_bytes"`
}

// ResultPart is one content part: type "text" (Text), "image" or "audio"
// (MIMEType, Data in base64, or OmittedBytes when it did not fit),
// "resource" (URI, MIMEType, Text) or "resource_link" (URI, Text: its
// name).
type ResultPart struct {
	Type         string `json:"type"`
	Text         string `json:"text,omitempty"`
	MIMEType     string `json:"mime_type,omitempty"`
	Data         string `json:"data,omitempty"`
	URI          string `json:"uri,omitempty"`
	OmittedBytes int    `json:"omitted_bytes,omitempty"`
}

// FormatResult renders res of tool of server for the model, within about
// limit bytes (DefaultResultLimit when <= 0), like terminal output: text
// keeps its head and tail with a note of what was left out (valid UTF-8),
// images and audio are kept while they fit (else replaced by their size),
// structured content is kept when it fits in half the limit (else cut as
// text). ok is !res.IsError.
func FormatResult(server, tool string, res *sdk.CallToolResult, limit int) (text string, ok bool) {
	if limit <= 0 {
		limit = DefaultResultLimit
	}
	out := Result{Server: server, Tool: tool, IsError: res.IsError, Content: []ResultPart{}}
	budget := limit
	// Text first: it is what the model reads.
	textTotal := 0
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			textTotal += len(c.Text)
		case *sdk.EmbeddedResource:
			if c.Resource != nil {
				textTotal += len(c.Resource.Text)
			}
		}
	}
	textBudget := budget
	if res.StructuredContent != nil {
		textBudget = budget / 2
	}
	cut := textTotal > textBudget
	// Each text part gets its share of the budget, head and tail kept.
	share := func(n int) int {
		if !cut || textTotal == 0 {
			return n
		}
		return max(64, int(int64(textBudget)*int64(n)/int64(textTotal)))
	}
	used := 0
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			out.TotalBytes += len(c.Text)
			t, tr := headTail(c.Text, share(len(c.Text)))
			out.Truncated = out.Truncated || tr
			used += len(t)
			out.Content = append(out.Content, ResultPart{Type: "text", Text: t})
		case *sdk.EmbeddedResource:
			if c.Resource == nil {
				continue
			}
			out.TotalBytes += len(c.Resource.Text) + len(c.Resource.Blob)
			p := ResultPart{Type: "resource", URI: c.Resource.URI, MIMEType: c.Resource.MIMEType}
			if c.Resource.Text != "" {
				t, tr := headTail(c.Resource.Text, share(len(c.Resource.Text)))
				out.Truncated = out.Truncated || tr
				used += len(t)
				p.Text = t
			} else if len(c.Resource.Blob) > 0 {
				p.OmittedBytes = len(c.Resource.Blob)
				out.Truncated = true
			}
			out.Content = append(out.Content, p)
		case *sdk.ResourceLink:
			out.Content = append(out.Content, ResultPart{Type: "resource_link", URI: c.URI, Text: c.Name, MIMEType: c.MIMEType})
		}
	}
	// Then images and audio, while they fit.
	for _, c := range res.Content {
		var typ, mime string
		var data []byte
		switch c := c.(type) {
		case *sdk.ImageContent:
			typ, mime, data = "image", c.MIMEType, c.Data
		case *sdk.AudioContent:
			typ, mime, data = "audio", c.MIMEType, c.Data
		default:
			continue
		}
		enc := base64.StdEncoding.EncodedLen(len(data))
		out.TotalBytes += len(data)
		p := ResultPart{Type: typ, MIMEType: mime}
		if used+enc <= budget {
			p.Data = base64.StdEncoding.EncodeToString(data)
			used += enc
		} else {
			p.OmittedBytes = len(data)
			out.Truncated = true
		}
		out.Content = append(out.Content, p)
	}
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err == nil {
			out.TotalBytes += len(b)
			if len(b) <= budget-min(used, budget/2) {
				out.StructuredContent = b
			} else {
				t, _ := headTail(string(b), budget/2)
				s, _ := json.Marshal(t)
				out.StructuredContent = s
				out.Truncated = true
			}
		}
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return fmt.Sprintf(`{"error":%q}`, err.Error()), false
	}
	return string(raw), !res.IsError
}

// headTail keeps s whole when it fits in n bytes, else its head and tail
// (about n/2 each, cut at rune boundaries) around a note of the bytes left
// out. Invalid UTF-8 is replaced.
func headTail(s string, n int) (string, bool) {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s, false
	}
	h := n / 2
	for h > 0 && !utf8.RuneStart(s[h]) {
		h--
	}
	t := len(s) - n/2
	for t < len(s) && !utf8.RuneStart(s[t]) {
		t++
	}
	return s[:h] + fmt.Sprintf("\n[… %d bytes omitted …]\n", t-h) + s[t:], true
}
