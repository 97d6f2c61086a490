package ocf

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Reading YAML as ocf-data-sampler does: pyaml_env.parse_config over PyYAML's SafeLoader.
// go.yaml.in/yaml/v3 gives the document's nodes with their lines; the scalars are then
// resolved here by YAML 1.1's rules (PyYAML's), not yaml.v3's YAML 1.2 ones.

// kind is the Python type a YAML value becomes.
type kind int

const (
	kNull kind = iota
	kBool
	kInt
	kFloat
	kStr
	kTime // a date or timestamp (PyYAML gives datetime.date / datetime.datetime)
	kMap
	kSeq
)

func (k kind) String() string {
	return [...]string{"null", "a boolean", "an integer", "a number", "a string", "a date", "a mapping", "a list"}[k]
}

// value is one YAML value as Python sees it, with the line it starts on.
type value struct {
	kind    kind
	line    int
	keyLine int // the line of the key it is the value of (0: none), where a missing key of it is reported
	b       bool
	i       int64
	f       float64
	s       string // kStr; the source text of every scalar
	// env: a value tagged !ENV holds its text before substitution here (the variables' names),
	// which messages show instead of the value (shown): an environment variable may hold a
	// secret, and its value is never printed.
	env   string
	keys  []*value
	items []*value // kMap: the values of keys; kSeq: the elements
}

// shown is the value as a message may quote it: the text, or for a value substituted from the
// environment (!ENV) the text before substitution, which names the variables.
func (v *value) shown() string {
	if v.env != "" {
		return "!ENV " + strconv.Quote(v.env)
	}
	return strconv.Quote(v.s)
}

// get is the value of key k in a mapping (the last one, as PyYAML keeps it), and its key.
func (v *value) get(k string) (val, key *value) {
	for i := len(v.keys) - 1; i >= 0; i-- {
		if v.keys[i].kind == kStr && v.keys[i].s == k {
			return v.items[i], v.keys[i]
		}
	}
	return nil, nil
}

// Env looks an environment variable up (os.LookupEnv).
type Env func(name string) (string, bool)

// readYAML parses data into a value tree. It returns the line of a syntax error.
func readYAML(data []byte, env Env) (*value, int, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, syntaxLine(err), fmt.Errorf("YAML syntax error: %v", trimYAMLError(err))
	}
	if doc.Kind == 0 || len(doc.Content) == 0 { // an empty file: None
		return &value{kind: kNull, line: 1}, 0, nil
	}
	r := reader{env: env}
	v, err := r.node(doc.Content[0])
	if err != nil {
		return nil, r.line, err
	}
	return v, 0, nil
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

func syntaxLine(err error) int {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

func trimYAMLError(err error) string {
	s := strings.TrimPrefix(err.Error(), "yaml: ")
	return yamlLine.ReplaceAllString(s, "line $1")
}

type reader struct {
	env       Env
	line      int                 // the line of the node an error is about
	active    map[*yaml.Node]bool // the anchors being expanded (a recursive alias is refused)
	nodes     int                 // values made and keys merged: aliases can multiply them (bounded)
	aliasLine int                 // the line of the outermost alias being expanded; 0: none
}

// maxNodes bounds the work of reading a document: the values it expands to through aliases
// and the keys its merges (<<) copy, each one unit. A configuration has a few hundred.
const maxNodes = 1 << 20

// count adds n units of work at the node on line; past maxNodes the document is refused,
// naming the line of the alias being expanded, if any (the anchored node's own line would not
// say which use of it is one too many).
func (r *reader) count(n, line int) error {
	if r.nodes += n; r.nodes > maxNodes {
		r.line = line
		if r.aliasLine != 0 {
			r.line = r.aliasLine
		}
		return fmt.Errorf("the document expands to more than %d values and merged keys through aliases and merges (<<); a configuration has a few hundred", maxNodes)
	}
	return nil
}

func (r *reader) node(n *yaml.Node) (*value, error) {
	r.line = n.Line
	if err := r.count(1, n.Line); err != nil {
		return nil, err
	}
	switch n.Kind {
	case yaml.AliasNode:
		if r.active == nil {
			r.active = map[*yaml.Node]bool{}
		}
		if r.active[n.Alias] {
			return nil, fmt.Errorf("a recursive alias *%s; a configuration is a tree", n.Value)
		}
		r.active[n.Alias] = true
		defer delete(r.active, n.Alias)
		if r.aliasLine == 0 {
			r.aliasLine = n.Line
			defer func() { r.aliasLine = 0 }()
		}
		return r.node(n.Alias)
	case yaml.MappingNode:
		return r.mapping(n)
	case yaml.SequenceNode:
		v := &value{kind: kSeq, line: n.Line}
		for _, c := range n.Content {
			e, err := r.node(c)
			if err != nil {
				return nil, err
			}
			v.items = append(v.items, e)
		}
		return v, nil
	case yaml.ScalarNode:
		return r.scalar(n)
	}
	return nil, fmt.Errorf("unsupported YAML node at line %d", n.Line)
}

func (r *reader) mapping(n *yaml.Node) (*value, error) {
	v := &value{kind: kMap, line: n.Line}
	have := map[string]bool{} // the keys so far: a merge adds only the others, in time linear in its keys
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		if kn.Kind == yaml.ScalarNode && kn.Value == "<<" && kn.Tag == "!!merge" { // merge keys: SafeLoader supports them
			m, err := r.node(vn)
			if err != nil {
				return nil, err
			}
			for _, src := range mergeSources(m) {
				if err := r.count(len(src.keys), kn.Line); err != nil {
					return nil, err
				}
				for j, k := range src.keys {
					if !have[k.s] {
						have[k.s] = true
						v.keys, v.items = append(v.keys, k), append(v.items, src.items[j])
					}
				}
			}
			continue
		}
		k, err := r.node(kn)
		if err != nil {
			return nil, err
		}
		if k.kind == kMap || k.kind == kSeq {
			r.line = kn.Line
			return nil, fmt.Errorf("a %s as a mapping key; PyYAML cannot hash it", k.kind)
		}
		e, err := r.node(vn)
		if err != nil {
			return nil, err
		}
		if e.keyLine == 0 {
			e.keyLine = kn.Line
		}
		have[k.s] = true
		v.keys, v.items = append(v.keys, k), append(v.items, e)
	}
	return v, nil
}

func mergeSources(m *value) []*value {
	if m.kind == kMap {
		return []*value{m}
	}
	var out []*value
	for _, e := range m.items {
		if e.kind == kMap {
			out = append(out, e)
		}
	}
	return out
}

// envRef is pyaml_env's pattern for ${VAR} and ${VAR:default} (default_sep ":").
var envRef = regexp.MustCompile(`.*?\$\{([^}{:]+)(:[^}]+)?\}.*?`)

// substitute replaces the ${VAR} references of a value tagged !ENV as pyaml_env does: the
// variable's value, else its default, else "N/A". The result is a string.
func substitute(s string, env Env) string {
	out := s
	for _, m := range envRef.FindAllStringSubmatch(s, -1) {
		name, def := m[1], "N/A"
		ref := name
		if m[2] != "" {
			def, ref = m[2][1:], name+m[2]
		}
		val, ok := env(name)
		if !ok {
			val = def
		}
		out = strings.ReplaceAll(out, "${"+ref+"}", val)
	}
	return out
}

func (r *reader) scalar(n *yaml.Node) (*value, error) {
	v := &value{line: n.Line, s: n.Value}
	switch {
	case n.Tag == "!ENV":
		v.kind, v.s, v.env = kStr, substitute(n.Value, r.env), n.Value
		return v, nil
	case strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!"):
		return nil, fmt.Errorf("could not determine a constructor for the tag %q", n.Tag)
	case n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0:
		v.kind = kStr
		return v, nil
	}
	resolvePlain(v)
	return v, nil
}

// YAML 1.1's implicit types, as PyYAML's resolver writes them.
var (
	reBool  = regexp.MustCompile(`^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$`)
	reNull  = regexp.MustCompile(`^(?:~|null|Null|NULL|)$`)
	reInt   = regexp.MustCompile(`^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$`)
	reFloat = regexp.MustCompile(`^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9_]+(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$`)
	reTime  = regexp.MustCompile(`^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$`)
)

// resolvePlain gives a plain scalar its YAML 1.1 type.
func resolvePlain(v *value) {
	s := v.s
	switch {
	case reBool.MatchString(s):
		v.kind = kBool
		v.b = strings.ContainsAny(s[:1], "yYtToO") && !strings.EqualFold(s, "off")
	case reNull.MatchString(s):
		v.kind = kNull
	case reInt.MatchString(s):
		if i, ok := yaml11Int(s); ok {
			v.kind, v.i = kInt, i
		} else { // beyond int64: Python keeps it exact; as a number it is out of every range here
			v.kind, v.f = kFloat, math.Inf(1)
		}
	case reFloat.MatchString(s):
		v.kind, v.f = kFloat, yaml11Float(s)
	case reTime.MatchString(s):
		v.kind = kTime
	default:
		v.kind = kStr
	}
}

func yaml11Int(s string) (int64, bool) {
	s = strings.ReplaceAll(s, "_", "")
	sign := int64(1)
	if s[0] == '-' || s[0] == '+' {
		if s[0] == '-' {
			sign = -1
		}
		s = s[1:]
	}
	var n int64
	var err error
	switch {
	case s == "0":
		return 0, true
	case strings.HasPrefix(s, "0b"):
		n, err = strconv.ParseInt(s[2:], 2, 64)
	case strings.HasPrefix(s, "0x"):
		n, err = strconv.ParseInt(s[2:], 16, 64)
	case s[0] == '0':
		n, err = strconv.ParseInt(s[1:], 8, 64)
	case strings.Contains(s, ":"): // base 60
		for _, part := range strings.Split(s, ":") {
			d, _ := strconv.ParseInt(part, 10, 64)
			n = n*60 + d
		}
	default:
		n, err = strconv.ParseInt(s, 10, 64)
	}
	return sign * n, err == nil
}

func yaml11Float(s string) float64 {
	s = strings.ToLower(strings.ReplaceAll(s, "_", ""))
	sign := 1.0
	if s[0] == '-' || s[0] == '+' {
		if s[0] == '-' {
			sign = -1
		}
		s = s[1:]
	}
	switch {
	case s == ".inf":
		return sign * math.Inf(1)
	case s == ".nan":
		return math.NaN()
	case strings.Contains(s, ":"):
		var f float64
		for _, part := range strings.Split(s, ":") {
			d, _ := strconv.ParseFloat(part, 64)
			f = f*60 + d
		}
		return sign * f
	}
	f, _ := strconv.ParseFloat(s, 64)
	return sign * f
}
