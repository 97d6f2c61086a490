package sampler

import "github.com/gobatch/gobatch/sampler/rules"

// View is how a batch is presented to the trainer (rules.View): its rule set's, for the job.
type View = rules.View
