package model

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
)

// buildParams translates req into openai-go's request parameters. stream=true
// is added by the caller with option.WithJSONSet. Errors are
// KindInvalidRequest.
func buildParams(req Request) (openai.ChatCompletionNewParams, error) {
	p := openai.ChatCompletionNewParams{
		Model: shared.ChatModel(req.Model),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{
			IncludeUsage: openai.Bool(true),
		},
	}
	p.Messages = make([]openai.ChatCompletionMessageParamUnion, 0, len(req.Messages))
	for i, m := range req.Messages {
		u, err := messageParam(m)
		if err != nil {
			return p, &Error{Kind: KindInvalidRequest, Err: fmt.Errorf("message %d: %w", i, err)}
		}
		p.Messages = append(p.Messages, u)
	}
	for _, t := range req.Tools {
		u, err := toolParam(t)
		if err != nil {
			return p, &Error{Kind: KindInvalidRequest, Err: fmt.Errorf("tool %q: %w", t.Name, err)}
		}
		p.Tools = append(p.Tools, u)
	}
	return p, nil
}

func messageParam(m Message) (openai.ChatCompletionMessageParamUnion, error) {
	switch m.Role {
	case RoleSystem:
		return openai.SystemMessage(m.Content), nil
	case RoleDeveloper:
		return openai.DeveloperMessage(m.Content), nil
	case RoleUser:
		return openai.UserMessage(m.Content), nil
	case RoleTool:
		if m.ToolCallID == "" {
			return openai.ChatCompletionMessageParamUnion{}, fmt.Errorf("tool message without tool_call_id")
		}
		return openai.ToolMessage(m.Content, m.ToolCallID), nil
	case RoleAssistant:
		var a openai.ChatCompletionAssistantMessageParam
		// With tool calls, empty content is omitted (valid per the API);
		// without, content is always sent, even when empty.
		if m.Content != "" || len(m.ToolCalls) == 0 {
			a.Content.OfString = openai.String(m.Content)
		}
		for j, tc := range m.ToolCalls {
			if tc.ID == "" || tc.Name == "" {
				return openai.ChatCompletionMessageParamUnion{}, fmt.Errorf("tool call %d without id or name", j)
			}
			a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID: tc.ID,
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
						Name:      tc.Name,
						Arguments: tc.Arguments,
					},
				},
			})
		}
		return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}, nil
	default:
		return openai.ChatCompletionMessageParamUnion{}, fmt.Errorf("unknown role %q", m.Role)
	}
}

func toolParam(t Tool) (openai.ChatCompletionToolUnionParam, error) {
	if t.Name == "" {
		return openai.ChatCompletionToolUnionParam{}, fmt.Errorf("tool without name")
	}
	def := shared.FunctionDefinitionParam{Name: t.Name}
	if t.Description != "" {
		def.Description = openai.String(t.Description)
	}
	if raw := bytes.TrimSpace(t.Parameters); len(raw) > 0 {
		// Keep every value's JSON text verbatim (numbers keep their precision);
		// only the top-level key order is normalised (sorted), which keeps the
		// request deterministic.
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
			return openai.ChatCompletionToolUnionParam{}, fmt.Errorf("parameters must be a JSON object")
		}
		params := make(shared.FunctionParameters, len(obj))
		for k, v := range obj {
			params[k] = v
		}
		def.Parameters = params
	}
	return openai.ChatCompletionFunctionTool(def), nil
}
