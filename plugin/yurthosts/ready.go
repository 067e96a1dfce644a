package yurthosts

// Ready implements the ready plugin's Readiness interface: true once the
// first list of the ConfigMap and the Service has been received (a missing
// object counts as received).
func (y *YurtHosts) Ready() bool { return y.watcher != nil && y.watcher.hasSynced() }
