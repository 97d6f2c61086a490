package ocf

import "github.com/gobatch/gobatch/config"

// File is what messages call a file of this format.
const File = "an ocf-data-sampler YAML file"

func init() {
	config.RegisterForeign(config.Foreign{
		What: File, Extensions: []string{".yaml", ".yml"}, Translate: translateFile,
		PathsFromWorkingDir: true, // ocf-data-sampler opens relative paths from the working directory
	})
}

// translateFile reads, validates and translates a file, as package config asks for a foreign
// format: the problems are every reason the file is refused.
func translateFile(data []byte, env func(string) (string, bool)) (*config.Translation, []config.Problem) {
	cfg, problems := Read(data, env)
	if len(problems) > 0 {
		return nil, problems
	}
	sources, problems := Translate(cfg, cfg.Line)
	if len(problems) > 0 {
		return nil, problems
	}
	tr := Raw(sources, cfg.Line)
	tr.Secrets = cfg.secrets
	return tr, nil
}
