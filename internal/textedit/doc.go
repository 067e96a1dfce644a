// Package textedit is what the editors share: a mapping lookup in a YAML
// node tree, the bounded parse of a configuration file of one kind, and the
// unified diffs --dry-run prints.
package textedit
