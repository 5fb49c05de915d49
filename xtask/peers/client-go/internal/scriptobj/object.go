// Package scriptobj is the object both script formats (fifo-peer's and store-peer's) describe:
// the part of a Pod a script controls, and the Pod it stands for.
package scriptobj

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Object is the part of a Pod a script controls.
type Object struct {
	Namespace       string            `json:"namespace,omitempty"`
	Name            string            `json:"name"`
	ResourceVersion string            `json:"rv,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
}

// Pod builds the Pod a script object stands for.
func Pod(o Object) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace:       o.Namespace,
		Name:            o.Name,
		ResourceVersion: o.ResourceVersion,
		Labels:          o.Labels,
	}}
}
