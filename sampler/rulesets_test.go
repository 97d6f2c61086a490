package sampler

// The sampler's tests run jobs under every rule set a program may register: gobatch's (package
// rules) and ocf-data-sampler's, which package ocf registers when it is imported. ocf imports
// the rule interface (sampler/rules), never the sampler, so this test may import it.
import _ "github.com/gobatch/gobatch/ocf"
