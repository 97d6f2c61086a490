package config

import (
	"os"
	"slices"
	"strings"
	"sync"
)

// Foreign is a configuration format written for another tool (an ocf-data-sampler YAML file),
// translated into gobatch's raw shape by the package that owns that tool's rules. The package
// registers it for its file name extensions (RegisterForeign) from an init function, so that
// config reads such a file without knowing the tool: a program that imports the package reads
// its files, one that does not refuses them as TOML would.
type Foreign struct {
	// What names a file of the format in messages ("an ocf-data-sampler YAML file").
	What string
	// Extensions are the file name extensions, lower case with the dot (".yaml").
	Extensions []string
	// Translate reads data, with env the environment's variables (for substitutions the
	// format has), into the shape a TOML file decodes to, without [batch] (gobatch's own
	// options come from the command line or the Loader's keywords); or the problems that
	// refuse it, each with its line and the format's own key.
	Translate func(data []byte, env func(string) (string, bool)) (*Translation, []Problem)
	// PathsFromWorkingDir: relative store paths are resolved from the working directory (as
	// the other tool opens them), not from the file's folder.
	PathsFromWorkingDir bool
}

// Translation is a foreign file in gobatch's raw shape. Lines is where each gobatch field comes
// from in the file ("source[1].channels" -> its line), Fields the file's own key it comes from
// ("source[0].store" -> "input_data.satellite.zarr_path"), so that messages name the file's
// keys.
type Translation struct {
	Raw    map[string]any
	Lines  map[string]int
	Fields map[string]string
	// Secrets are the values the file took from the environment: no message shows them
	// (Config.Redact).
	Secrets []Secret
}

// Secret is a value a configuration took from an environment variable, and the variable's
// name: messages show ${Name} in its place.
type Secret struct{ Name, Value string }

// minSecret is the shortest value redacted: a shorter one would turn every such word of a
// message into a variable's name, and is no secret.
const minSecret = 4

// redact replaces every secret's value in s by its variable's reference.
func redact(s string, secrets []Secret) string {
	for _, sec := range secrets {
		if len(sec.Value) >= minSecret {
			s = strings.ReplaceAll(s, sec.Value, "${"+sec.Name+"}")
		}
	}
	return s
}

// Problem is one reason a foreign file is refused: its line (0 when unknown), the file's key
// and the message.
type Problem struct {
	Line  int
	Field string
	Msg   string
}

var (
	foreignMu sync.Mutex
	foreigns  []Foreign
)

// RegisterForeign makes a foreign format known for its extensions. It panics when an extension
// is taken already (a programming error: formats register from init functions).
func RegisterForeign(f Foreign) {
	foreignMu.Lock()
	defer foreignMu.Unlock()
	for _, g := range foreigns {
		for _, e := range f.Extensions {
			if slices.Contains(g.Extensions, e) || e == ".json" || e == ".toml" {
				panic("config: extension " + e + " registered twice")
			}
		}
	}
	foreigns = append(foreigns, f)
}

func foreignByExt(ext string) (Format, bool) {
	foreignMu.Lock()
	defer foreignMu.Unlock()
	for i, f := range foreigns {
		if slices.Contains(f.Extensions, ext) {
			return foreignFormats + Format(i), true
		}
	}
	return TOML, false
}

func foreignOf(format Format) (Foreign, bool) {
	foreignMu.Lock()
	defer foreignMu.Unlock()
	if i := int(format - foreignFormats); format >= foreignFormats && i < len(foreigns) {
		return foreigns[i], true
	}
	return Foreign{}, false
}

// decodeForeign translates a foreign file: its problems are the file's, with the line and the
// file's key; the lines of the gobatch fields point at the keys they come from.
func decodeForeign(c *collector, f Foreign, data []byte) map[string]any {
	tr, problems := f.Translate(data, os.LookupEnv)
	if len(problems) == 0 {
		c.lines, c.aliases, c.secrets = lineIndex(tr.Lines), fieldAliases(tr.Fields), tr.Secrets
		return tr.Raw
	}
	for _, p := range problems {
		if len(c.errs) < maxErrors {
			c.errs = append(c.errs, &FieldError{File: c.file, Line: p.Line, Field: p.Field, Msg: p.Msg})
		}
	}
	return nil
}
