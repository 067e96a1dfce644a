// Package textedit is what the editors share: a mapping lookup in a YAML
// node tree and the unified diffs --dry-run prints.
package textedit
