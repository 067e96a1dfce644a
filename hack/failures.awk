# failures.awk: from `go test -v` output, what each failed test reported as
# failures, after the run: go test streams t.Errorf at the moment it happens,
# often far above the "--- FAIL" line a CI excerpt shows, and prints it
# exactly as t.Logf. A message is a failure unless the source line it names
# logs (t.Log, t.Logf): the go files are looked up in dirs (the packages'
# directories, space-separated). A helper's lines (t.Helper) name the call,
# so they are kept, but for the two the helpers log most: a command's output
# ("tunnel-nodes-sync ARGS:") and a DNS probe's tally with nothing failed.
# Each message has up to 20 continuation lines.
# Each failed test is printed with its own lines (a subtest's are its own),
# in the order they ran, and the innermost failed tests' names close it.
# A panic (a test run past -timeout, say) is printed after them, with the
# tests it names as running.
# Usage: awk -v dirs="test/cluster test/realcluster" -f hack/failures.awk test-output.txt
BEGIN { ndirs = split(dirs, dir, " ") }
/^panic: / { panicked = $0; pcont = 10; cont = 0; next }
/^[ \t]/ && pcont > 0 { panicked = panicked "\n" $0; pcont--; next }
{ pcont = 0 }
/^=== (RUN|CONT|NAME) / { test = $3; cont = 0; if (!(test in seen)) { seen[test] = 1; order[++tests] = test }; next }
/^[ \t]*--- FAIL: / { failed[$3] = 1; next }
/^[ \t]+[^ \t]+\.go:[0-9]+: / {
	cont = 0
	if (logs($1) || $0 ~ /: tunnel-nodes-sync .*:$/ || $0 ~ /, 0 failed, slowest /) next
	n[test]++; out[test, n[test]] = $0; cont = 20; next
}
/^(        |\t\t)/ && cont > 0 { n[test]++; out[test, n[test]] = $0; cont--; next }
{ cont = 0 }

# logs: whether the source line "file.go:N:" names calls t.Log or t.Logf.
function logs(at,    parts, file, line, i, path, text, k) {
	split(at, parts, ":")
	file = parts[1]; line = parts[2] + 0
	for (i = 1; i <= ndirs; i++) {
		path = dir[i] "/" file
		if (!(path in read)) {
			read[path] = 1
			k = 0
			while ((getline text < path) > 0) src[path, ++k] = text
			close(path)
		}
		if ((path, line) in src)
			return src[path, line] ~ /\.Logf?\(/
	}
	return 0
}

END {
	for (t in failed)
		for (u in failed)
			if (index(u, t "/") == 1) parent[t] = 1
	names = ""
	for (k = 1; k <= tests; k++) {
		t = order[k]
		if (!(t in failed)) continue
		if (n[t] > 0) {
			print "=== what " t " reported (it failed):"
			for (i = 1; i <= n[t]; i++) print out[t, i]
		}
		if (!(t in parent)) names = names " " t
	}
	if (panicked != "") print "=== the test binary panicked:\n" panicked
	print "failed:" names
}
