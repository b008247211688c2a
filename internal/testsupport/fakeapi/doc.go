// Package fakeapi adapts client-go's clientsets, the fake one in unit
// tests and a real one in tests against an apiserver, to
// kubeclient.Interface, the proxy's client of the API. The proxy itself
// never links a Clientset (internal/kubeclient says why).
package fakeapi
