# failures.awk: from `go test -v` output, what each failed test printed (its
# file:line messages, each with up to 20 continuation lines), after the run:
# go test streams t.Errorf at the moment it happens, often far above the
# "--- FAIL" line a CI excerpt shows. Only the innermost failed tests are
# printed (a parent fails with its subtest and its own lines are mostly
# logs), each with its own lines alone, and their names close the digest.
# Usage: awk -f hack/failures.awk test-output.txt
/^=== (RUN|CONT|NAME) / { test = $3; cont = 0; next }
/^[ \t]*--- FAIL: / { failed[$3] = 1; next }
/^[ \t]+[^ \t]+\.go:[0-9]+: / { n[test]++; out[test, n[test]] = $0; cont = 20; next }
/^(        |\t\t)/ && cont > 0 { n[test]++; out[test, n[test]] = $0; cont--; next }
{ cont = 0 }
END {
	for (t in failed)
		for (u in failed)
			if (index(u, t "/") == 1) parent[t] = 1
	names = ""
	for (t in failed) {
		if (t in parent) continue
		print "=== what " t " printed (it failed):"
		from = n[t] > 300 ? n[t] - 300 : 0
		for (i = from + 1; i <= n[t]; i++) print out[t, i]
		names = names " " t
	}
	print "failed:" names
}
