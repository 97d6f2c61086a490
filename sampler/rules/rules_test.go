package rules_test

import (
	"testing"

	"github.com/gobatch/gobatch/sampler/rules"
	"github.com/gobatch/gobatch/sampler/rules/rulestest"
)

// gobatch's own rule set passes the suite every rule set passes (ocf's runs it in package ocf).
func TestGobatchRules(t *testing.T) { rulestest.Run(t, rules.Gobatch) }

// The registry: an unknown name is refused naming those known; Accepting names the rule sets
// that give a source's keys a meaning.
func TestLookupAndAccepting(t *testing.T) {
	if _, err := rules.Lookup("nope"); err == nil || err.Error() != `unknown rules "nope"; expected "gobatch" (the rule sets this program knows)` {
		t.Errorf("Lookup(nope) = %v", err)
	}
	if got := rules.Accepting(rules.SourceKeys{Role: "nwp", DropoutFraction: 0.1}); got != "none" {
		t.Errorf("Accepting(NWP dropout) = %s with gobatch's rules alone, want none", got)
	}
}
