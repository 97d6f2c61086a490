package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// lineIndex maps field paths ("batch.size", "source[1]", "source[1].dtype") to the 1-based line
// where they are written. Lookups fall back to the nearest enclosing field, so a missing key is
// reported at its table's header.
type lineIndex map[string]int

func (li lineIndex) find(field string) int {
	for f := field; f != ""; f = parentField(f) {
		if l, ok := li[f]; ok {
			return l
		}
	}
	return 0
}

func parentField(f string) string {
	if strings.HasSuffix(f, "]") {
		if i := strings.LastIndexByte(f, '['); i >= 0 {
			return f[:i]
		}
	}
	if i := strings.LastIndexByte(f, '.'); i >= 0 {
		return f[:i]
	}
	return ""
}

func (li lineIndex) record(field string, line int) {
	if _, ok := li[field]; !ok {
		li[field] = line
	}
}

func joinField(table, key string) string {
	if table == "" {
		return key
	}
	return table + "." + key
}

// tomlLines finds where tables and keys are written in a TOML document that has already parsed
// without error. It understands table headers, arrays of tables, dotted and quoted keys,
// comments, multi-line arrays and multi-line strings; keys inside inline tables are not
// indexed (lookups fall back to the enclosing key).
func tomlLines(data []byte) lineIndex {
	li := lineIndex{}
	arrays := map[string]int{} // resolved array-of-tables path -> tables seen
	resolve := func(name string) string {
		path := ""
		if name == "" {
			return ""
		}
		for _, part := range splitKey(name) {
			path = joinField(path, part)
			if n := arrays[path]; n > 0 {
				path = fmt.Sprintf("%s[%d]", path, n-1)
			}
		}
		return path
	}
	table := ""
	depth := 0     // open brackets of a multi-line array value
	inString := "" // the closing delimiter of an open multi-line string
	for i, line := range strings.Split(string(data), "\n") {
		n := i + 1
		if inString != "" {
			j := strings.Index(line, inString)
			if j < 0 {
				continue
			}
			line = line[j+len(inString):]
			inString = ""
		}
		code, openString := stripComment(line)
		code = strings.TrimSpace(code)
		if depth > 0 {
			depth += bracketDelta(code)
			inString = openString
			continue
		}
		switch {
		case strings.HasPrefix(code, "[["):
			end := strings.Index(code, "]]")
			if end < 0 {
				continue
			}
			parts := splitKey(code[2:end])
			base := joinField(resolve(strings.Join(parts[:len(parts)-1], ".")), parts[len(parts)-1])
			arrays[base]++
			table = fmt.Sprintf("%s[%d]", base, arrays[base]-1)
			li.record(base, n)
			li.record(table, n)
		case strings.HasPrefix(code, "["):
			end := strings.LastIndexByte(code, ']')
			if end < 0 {
				continue
			}
			table = resolve(code[1:end])
			li.record(table, n)
		default:
			eq := indexUnquoted(code, '=')
			if eq <= 0 {
				inString = openString
				continue
			}
			path := table
			for _, part := range splitKey(code[:eq]) {
				path = joinField(path, part)
				li.record(path, n)
			}
			depth = bracketDelta(code[eq+1:])
			inString = openString
		}
	}
	return li
}

// splitKey splits a (possibly dotted, possibly quoted) TOML key into its parts.
func splitKey(k string) []string {
	var parts []string
	var cur strings.Builder
	quote := byte(0)
	for i := 0; i < len(k); i++ {
		ch := k[i]
		switch {
		case quote != 0:
			if ch == quote {
				quote = 0
			} else {
				cur.WriteByte(ch)
			}
		case ch == '"' || ch == '\'':
			quote = ch
		case ch == '.':
			parts = append(parts, strings.TrimSpace(cur.String()))
			cur.Reset()
		case ch == ' ' || ch == '\t':
		default:
			cur.WriteByte(ch)
		}
	}
	return append(parts, strings.TrimSpace(cur.String()))
}

// stripComment removes a trailing comment, leaving strings alone. If the line opens a
// multi-line string that does not close on it, openString is that string's delimiter.
func stripComment(line string) (code, openString string) {
	for i := 0; i < len(line); i++ {
		switch line[i] {
		case '#':
			return line[:i], ""
		case '"', '\'':
			q := line[i]
			if strings.HasPrefix(line[i:], strings.Repeat(string(q), 3)) {
				delim := line[i : i+3]
				j := strings.Index(line[i+3:], delim)
				if j < 0 {
					return line[:i], delim
				}
				i += 3 + j + 2
				continue
			}
			for i++; i < len(line) && line[i] != q; i++ {
				if q == '"' && line[i] == '\\' {
					i++
				}
			}
		}
	}
	return line, ""
}

// eachUnquoted calls f with the index and value of every byte of s outside quoted strings
// (the quotes themselves excluded), until f returns false.
func eachUnquoted(s string, f func(i int, c byte) bool) {
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case !f(i, c):
			return
		}
	}
}

// indexUnquoted is strings.IndexByte outside quoted strings.
func indexUnquoted(s string, b byte) int {
	at := -1
	eachUnquoted(s, func(i int, c byte) bool {
		if c == b {
			at = i
			return false
		}
		return true
	})
	return at
}

// bracketDelta counts '[' minus ']' outside quoted strings.
func bracketDelta(s string) int {
	d := 0
	eachUnquoted(s, func(_ int, c byte) bool {
		switch c {
		case '[':
			d++
		case ']':
			d--
		}
		return true
	})
	return d
}

// jsonLines walks a JSON document and records the line of every object key and array element.
// It also returns the paths of duplicate keys (encoding/json keeps the last silently). A syntax
// error is returned as the decoder reports it.
func jsonLines(data []byte) (lineIndex, []string, error) {
	li := lineIndex{}
	var dups []string
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var walk func(path string) error
	walk = func(path string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		d, ok := tok.(json.Delim)
		if !ok {
			return nil
		}
		switch d {
		case '{':
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				key, _ := kt.(string)
				p := joinField(path, key)
				if seen[key] {
					dups = append(dups, p)
				}
				seen[key] = true
				li.record(p, lineAt(data, int(dec.InputOffset())))
				if err := walk(p); err != nil {
					return err
				}
			}
		case '[':
			for i := 0; dec.More(); i++ {
				p := fmt.Sprintf("%s[%d]", path, i)
				li.record(p, lineAt(data, nextValue(data, int(dec.InputOffset()))))
				if err := walk(p); err != nil {
					return err
				}
			}
		}
		_, err = dec.Token() // the closing delimiter
		return err
	}
	if err := walk(""); err != nil {
		if err == io.EOF {
			err = fmt.Errorf("empty document")
		}
		return nil, nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, fmt.Errorf("unexpected data after the top-level value")
	}
	return li, dups, nil
}

// nextValue skips whitespace and separators from off to the start of the next JSON value.
func nextValue(data []byte, off int) int {
	for off < len(data) {
		switch data[off] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
		default:
			return off
		}
	}
	return off
}

// lineAt is the 1-based line of byte offset off.
func lineAt(data []byte, off int) int {
	if off > len(data) {
		off = len(data)
	}
	return bytes.Count(data[:off], []byte{'\n'}) + 1
}
