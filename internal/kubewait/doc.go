// Package kubewait is every "until live" wait of install and revert: a
// step is done when its effect is live, not when its write returned, and
// the apiserver may be restarting under any of them (the control-plane step
// restarts it), so errors that mean it is away are waited out (For,
// RetryWhileAway).
package kubewait
