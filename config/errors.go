package config

import (
	"fmt"
	"strings"
)

// FieldError is one problem in a configuration file.
type FieldError struct {
	File  string // the file name as given to Load or Parse
	Line  int    // 1-based line of the field, 0 when unknown
	Field string // dotted path of the field, e.g. "source[1].dtype"; empty for syntax errors
	Msg   string // what is wrong and what was expected
}

func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in one file, in the order they were found. It is never empty
// when returned as an error.
type Errors []*FieldError

func (es Errors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

// Unwrap lets errors.As find the individual FieldErrors.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// maxErrors bounds the report for a badly broken file.
const maxErrors = 20

// collector gathers the FieldErrors of one parse and resolves lines.
type collector struct {
	file    string
	lines   lineIndex
	aliases fieldAliases
	secrets []Secret
	errs    Errors
}

func (c *collector) add(field, format string, args ...any) {
	if len(c.errs) >= maxErrors {
		return
	}
	c.errs = append(c.errs, &FieldError{
		File:  c.file,
		Line:  c.lines.find(field),
		Field: c.aliases.name(field),
		Msg:   redact(fmt.Sprintf(format, args...), c.secrets),
	})
}

func (c *collector) err() error {
	if len(c.errs) == 0 {
		return nil
	}
	return c.errs
}

// fieldAliases name fields as the file writes them when that differs from gobatch's path: an
// ocf-data-sampler file's source[0].store is its input_data.satellite.zarr_path.
type fieldAliases map[string]string

// name is field's name in the file: its own alias, else its nearest aliased parent's with the
// rest appended, else field.
func (a fieldAliases) name(field string) string {
	for f := field; f != ""; f = parentField(f) {
		if n, ok := a[f]; ok {
			return n + strings.TrimPrefix(field, f)
		}
	}
	return field
}
