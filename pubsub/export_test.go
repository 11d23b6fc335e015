package pubsub

// Connected reports whether m has a live connection for its channels, so
// tests can wait for the Manager to notice a killed server: the dedicated
// connection outside a cluster, or some channel's confirmed subscription
// on the shared transport.
func Connected(m *Manager) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.channels {
		if c.receiving && c.confirmed {
			return true
		}
	}
	return m.single != nil && m.single.connected
}
