package main

import (
	"os/exec"
	"strings"
	"testing"
)

// `run --config -` reads a JSON document from stdin (gobatch.Loader passes its dict this way,
// with no temporary file) and names it "<config dict>" in errors.
func TestRunConfigFromStdin(t *testing.T) {
	t.Run("produces", func(t *testing.T) {
		name := ringName(t)
		cmd := exec.Command(binPath, "run", "--config", "-", "--ring", name)
		cmd.Stdin = strings.NewReader(`{"batch": {"size": 3, "batches": 7},
 "source": [{"name": "x", "kind": "synthetic", "shape": [4], "dtype": "int32"}]}`)
		p := startCmd(t, cmd)
		r, c := consume(t, name, p)
		seqs, _ := readAll(t, r, c)
		if len(seqs) != 7 || seqs[6] != 6 {
			t.Fatalf("read batches %v", seqs)
		}
		c.Close()
		p.expectExit(t, exitOK)
		noSegment(t, name)
	})
	for _, tc := range []struct{ name, doc, want string }{
		{"bad key", "{\n  \"batch\": {\n    \"size\": 2\n  },\n  \"source\": [\n    {\n      \"name\": \"x\",\n      \"kind\": \"synthetic\",\n" +
			"      \"shape\": [2],\n      \"dtype\": \"float33\"\n    }\n  ]\n}\n",
			`<config dict>:10: source[0].dtype: unknown dtype "float33"`},
		{"not JSON", `{"batch": `, "<config dict>: JSON syntax error"},
		{"layout", `{"batch": {"size": 2, "batches": 3}, "ring": {"slots": 2},
 "source": [{"name": "x", "kind": "synthetic", "shape": [2], "dtype": "uint8"}]}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"run", "--config", "-", "--ring", ringName(t)}
			if tc.want == "" { // a layout error after parsing: named by the document too
				args = append(args, "--start", "5")
				tc.want = "<config dict>: --start 5 is past the end"
			}
			cmd := exec.Command(binPath, args...)
			cmd.Stdin = strings.NewReader(tc.doc)
			p := startCmd(t, cmd)
			p.expectExit(t, exitUsage)
			if !strings.Contains(p.stderr.String(), tc.want) {
				t.Fatalf("stderr lacks %q:\n%s", tc.want, p.stderr.String())
			}
			noSegment(t, ringName(t))
		})
	}
}
