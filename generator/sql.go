package generator

import (
	"fmt"

	"github.com/lockgen/lockgen/templates"
)

// renderSQL renders the lockgendb schema and queries and the migrations of
// m, keyed by their output paths.
func renderSQL(m *model, render func(string, templates.Data) ([]byte, error)) (map[string][]byte, error) {
	data := templates.Data{Header: templates.Header, Prefix: m.TablePrefix, Jobs: len(m.Jobs) > 0}
	jobs := []sqlFile{
		{Path: m.SchemaPath, Template: templates.Schema},
		{Path: m.QueriesPath, Template: templates.Queries},
	}
	jobs = append(jobs, m.Migrations...)
	files := make(map[string][]byte, len(jobs))
	for _, j := range jobs {
		src, err := render(j.Template, data)
		if err != nil {
			return nil, fmt.Errorf("render %s: %w", j.Path, err)
		}
		files[j.Path] = src
	}
	return files, nil
}
