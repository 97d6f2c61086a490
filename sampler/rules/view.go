package rules

import "encoding/json"

// View is how a batch is presented to the trainer besides its flat tensors: tensors placed at
// other keys of a nested mapping, and constants added (PROTOCOL.md 2.9, "view"). A rule set
// makes it (Rules.View); feed writes it into the ring's batch description, from which the Python
// side nests every batch it hands out. Tensors it does not name stay at the top level under
// their own name. An empty View presents the batch flat.
type View []ViewItem

// ViewItem places one value at Key (1 to 8 non-empty strings, the path through the nesting):
// the tensor named Tensor, else the constant Strings (when HasStrings) or Int (when Int != nil).
type ViewItem struct {
	Key        []string
	Tensor     string
	Strings    []string
	HasStrings bool
	Int        *int64
}

// ViewTensor places tensor name at key.
func ViewTensor(name string, key ...string) ViewItem { return ViewItem{Key: key, Tensor: name} }

// ViewStrings places the strings s at key.
func ViewStrings(s []string, key ...string) ViewItem {
	return ViewItem{Key: key, Strings: append([]string{}, s...), HasStrings: true}
}

// ViewInt places the integer v at key.
func ViewInt(v int64, key ...string) ViewItem { return ViewItem{Key: key, Int: &v} }

// MarshalJSON writes the item as PROTOCOL.md 2.9 spells it: {"key": [...], "tensor": NAME},
// {"key": [...], "strings": [...]} or {"key": [...], "int": N}.
func (v ViewItem) MarshalJSON() ([]byte, error) {
	out := struct {
		Key     []string  `json:"key"`
		Tensor  string    `json:"tensor,omitempty"`
		Strings *[]string `json:"strings,omitempty"`
		Int     *int64    `json:"int,omitempty"`
	}{Key: v.Key, Int: v.Int}
	switch {
	case v.Tensor != "":
		out.Tensor, out.Int = v.Tensor, nil
	case v.HasStrings:
		out.Strings, out.Int = &v.Strings, nil
	}
	return json.Marshal(out)
}
