package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sessiond/sessiond/protocol"
)

// Bounds of a clarify call, to keep prompts readable and payloads small.
const (
	// MaxClarifyQuestions is the most questions one clarify call may ask.
	MaxClarifyQuestions = 10
	// MaxClarifyChoices is the most choices one question may offer.
	MaxClarifyChoices = 26
)

// ClarifyQuestion is one normalized question of a clarify call.
type ClarifyQuestion struct {
	// ID names the question within the call. The model may give one; when
	// it does not, ParseClarifyArgs assigns "q1", "q2", … by position.
	ID string `json:"id,omitempty"`
	// Question is the text shown to the user, trimmed, never empty.
	Question string `json:"question"`
	// Choices are the offered answers, trimmed, empty ones and duplicates
	// dropped; none means a free-text answer.
	Choices []string `json:"choices,omitempty"`
	// MultiSelect allows several choices as the answer; only set when
	// there are choices.
	MultiSelect bool `json:"multi_select,omitempty"`
}

// ClarifyResponse is the answer to one question, as returned to the model
// ([protocol.ClarifyAnswer]).
type ClarifyResponse = protocol.ClarifyAnswer

// ClarifyResult is the clarify tool's result (PROTOCOL §7,
// [protocol.ClarifyResult]).
type ClarifyResult = protocol.ClarifyResult

// ErrInvalidClarify is wrapped by every error of ParseClarifyArgs.
var ErrInvalidClarify = errors.New("invalid clarify arguments")

// ParseClarifyArgs normalizes the clarify tool's arguments into questions.
// It accepts a single question {question, choices?, multi_select?}, a list
// {questions: [{id?, question, choices?, multi_select?}, …]} (list items
// may also be plain strings), or both, the single question first. Choices
// may be strings, numbers or booleans. Unknown fields are ignored, but a
// key that differs from a known one only in case ("Question") is refused:
// what is asked is what the stored arguments show. It
// returns an error wrapping ErrInvalidClarify when the JSON is not an
// object, a question is empty, there is no question at all, IDs repeat, or
// the bounds MaxClarifyQuestions / MaxClarifyChoices are exceeded.
func ParseClarifyArgs(raw json.RawMessage) ([]ClarifyQuestion, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, fmt.Errorf("%w: expected a JSON object", ErrInvalidClarify)
	}
	var in struct {
		clarifyItem
		Questions []json.RawMessage `json:"questions"`
	}
	if err := decodeExact(raw, &in, true); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidClarify, err)
	}
	var items []clarifyItem
	if in.Question != nil || len(in.Choices) > 0 {
		items = append(items, in.clarifyItem)
	}
	for i, q := range in.Questions {
		var it clarifyItem
		q = bytes.TrimSpace(q)
		if len(q) > 0 && q[0] == '"' {
			var s string
			if err := json.Unmarshal(q, &s); err != nil {
				return nil, fmt.Errorf("%w: questions[%d]: %v", ErrInvalidClarify, i, err)
			}
			it.Question = &s
		} else if err := decodeExact(q, &it, true); err != nil {
			return nil, fmt.Errorf("%w: questions[%d]: %v", ErrInvalidClarify, i, err)
		}
		items = append(items, it)
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("%w: give question or questions", ErrInvalidClarify)
	}
	if len(items) > MaxClarifyQuestions {
		return nil, fmt.Errorf("%w: %d questions, at most %d", ErrInvalidClarify, len(items), MaxClarifyQuestions)
	}
	out := make([]ClarifyQuestion, 0, len(items))
	ids := map[string]bool{}
	for i, it := range items {
		q, err := it.normalize()
		if err != nil {
			return nil, fmt.Errorf("%w: question %d: %v", ErrInvalidClarify, i+1, err)
		}
		if q.ID != "" {
			if ids[q.ID] {
				return nil, fmt.Errorf("%w: question id %q repeated", ErrInvalidClarify, q.ID)
			}
			ids[q.ID] = true
		}
		out = append(out, q)
	}
	for i := range out {
		if out[i].ID != "" {
			continue
		}
		id := "q" + strconv.Itoa(i+1)
		for n := 2; ids[id]; n++ {
			id = "q" + strconv.Itoa(i+1) + "_" + strconv.Itoa(n)
		}
		ids[id] = true
		out[i].ID = id
	}
	return out, nil
}

type clarifyItem struct {
	ID          *string           `json:"id"`
	Question    *string           `json:"question"`
	Choices     []json.RawMessage `json:"choices"`
	MultiSelect *bool             `json:"multi_select"`
}

func (it clarifyItem) normalize() (ClarifyQuestion, error) {
	var q ClarifyQuestion
	if it.ID != nil {
		q.ID = strings.TrimSpace(*it.ID)
	}
	if it.Question != nil {
		q.Question = strings.TrimSpace(*it.Question)
	}
	if q.Question == "" {
		return q, errors.New("empty question")
	}
	if len(it.Choices) > MaxClarifyChoices {
		return q, fmt.Errorf("%d choices, at most %d", len(it.Choices), MaxClarifyChoices)
	}
	seen := map[string]bool{}
	for i, raw := range it.Choices {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return q, fmt.Errorf("choice %d: %v", i+1, err)
		}
		var s string
		switch v := v.(type) {
		case string:
			s = strings.TrimSpace(v)
		case float64, bool:
			s = strings.TrimSpace(string(raw))
		case nil:
			continue
		default:
			return q, fmt.Errorf("choice %d is not a string", i+1)
		}
		if s == "" || seen[s] {
			continue
		}
		seen[s] = true
		q.Choices = append(q.Choices, s)
	}
	q.MultiSelect = it.MultiSelect != nil && *it.MultiSelect && len(q.Choices) > 0
	return q, nil
}
