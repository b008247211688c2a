// Package fakeapi adapts a client-go clientset, in practice the fake one
// of unit and VM tests, to kubeclient.Interface, the proxy's client of
// the API. The proxy itself never links a clientset (internal/kubeclient
// says why); tests against a real apiserver use kubeclient.New.
package fakeapi
