// Package corefile edits Corefiles the way install needs: through a parse
// tree that remembers where every directive starts and ends in the source,
// so that an edit replaces or inserts exactly one span and leaves every
// other byte, comments included, alone. It adds a yurthosts block
// (EnsureYurthosts) or replaces one (SetYurthosts).
package corefile
