package textedit

import (
	"github.com/pmezard/go-difflib/difflib"
	"go.yaml.in/yaml/v3"
)

func MapValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// UnifiedDiff renders the change of one file for --dry-run.
func UnifiedDiff(path string, old, next []byte) string {
	diff, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(string(old)), B: difflib.SplitLines(string(next)),
		FromFile: path, ToFile: path + " (yurtdns)", Context: 2,
	})
	return diff
}
