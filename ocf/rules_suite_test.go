package ocf

import (
	"testing"

	"github.com/gobatch/gobatch/sampler/rules/rulestest"
)

// ocf's rule set passes the suite every rule set passes (gobatch's runs it in package rules).
func TestRulesSuite(t *testing.T) { rulestest.Run(t, Rules) }
