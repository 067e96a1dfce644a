package bench

// sample keeps at most n evenly spaced values of a sorted slice, for charts.
func sample(sorted []float64, n int) []float64 {
	if len(sorted) <= n {
		return sorted
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = sorted[i*(len(sorted)-1)/(n-1)]
	}
	return out
}
