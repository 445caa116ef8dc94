package tools

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseClarifyArgs(t *testing.T) {
	cases := []struct {
		in   string
		want []ClarifyQuestion
	}{
		{`{"question":" Which DB? ","choices":["postgres"," sqlite ","","postgres"]}`,
			[]ClarifyQuestion{{ID: "q1", Question: "Which DB?", Choices: []string{"postgres", "sqlite"}}}},
		{`{"question":"Name?"}`,
			[]ClarifyQuestion{{ID: "q1", Question: "Name?"}}},
		{`{"question":"Pick","choices":["a","b"],"multi_select":true,"extra":1}`,
			[]ClarifyQuestion{{ID: "q1", Question: "Pick", Choices: []string{"a", "b"}, MultiSelect: true}}},
		{`{"question":"Free","multi_select":true}`, // multi-select needs choices
			[]ClarifyQuestion{{ID: "q1", Question: "Free"}}},
		{`{"questions":[{"id":"db","question":"DB?","choices":["pg",3,true,null]},"Port?",{"question":"Why?"}]}`,
			[]ClarifyQuestion{
				{ID: "db", Question: "DB?", Choices: []string{"pg", "3", "true"}},
				{ID: "q2", Question: "Port?"},
				{ID: "q3", Question: "Why?"},
			}},
		{`{"question":"First","questions":[{"question":"Second","id":"q1"}]}`,
			[]ClarifyQuestion{{ID: "q1_2", Question: "First"}, {ID: "q1", Question: "Second"}}},
	}
	for _, tc := range cases {
		got, err := ParseClarifyArgs(json.RawMessage(tc.in))
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.in, got, tc.want)
		}
	}
}

func TestParseClarifyArgsErrors(t *testing.T) {
	many := `{"questions":[` + strings.TrimSuffix(strings.Repeat(`"q?",`, MaxClarifyQuestions+1), ",") + `]}`
	lots := `{"question":"q","choices":[` + strings.TrimSuffix(strings.Repeat(`"c",`, MaxClarifyChoices+1), ",") + `]}`
	for _, in := range []string{
		``, `null`, `[]`, `"text"`, `{`, `{}`, `{"question":""}`, `{"question":"   "}`,
		`{"questions":[]}`, `{"questions":[{"choices":["a"]}]}`, `{"questions":[{"id":"a","question":"x"},{"id":"a","question":"y"}]}`,
		`{"question":"q","choices":[{"x":1}]}`, `{"question":5}`, many, lots,
	} {
		if _, err := ParseClarifyArgs(json.RawMessage(in)); !errors.Is(err, ErrInvalidClarify) {
			t.Errorf("%q: err %v, want ErrInvalidClarify", in, err)
		}
	}
}

func TestClarifyResultJSON(t *testing.T) {
	r := ClarifyResult{Responses: []ClarifyResponse{
		{Question: "DB?", ChoicesOffered: []string{"pg", "sqlite"}, Answer: "pg"},
		{Question: "Extras?", ChoicesOffered: []string{"a", "b"}, Answer: []string{"a", "b"}},
	}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"responses":[{"question":"DB?","choices_offered":["pg","sqlite"],"answer":"pg"},{"question":"Extras?","choices_offered":["a","b"],"answer":["a","b"]}]}`
	if string(b) != want {
		t.Errorf("got %s\nwant %s", b, want)
	}
	b, _ = json.Marshal(ClarifyResult{Responses: []ClarifyResponse{{Question: "x"}}, TimedOut: true, Note: "no answer"})
	if want := `{"responses":[{"question":"x","choices_offered":null,"answer":null}],"timed_out":true,"note":"no answer"}`; string(b) != want {
		t.Errorf("got %s", b)
	}
}
