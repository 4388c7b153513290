package controller

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Preferred is what the rule reconcilers sharing d read from discovery now.
func (d *Discovery) Preferred() ([]*metav1.APIResourceList, map[schema.GroupVersion]error, error) {
	return d.preferred(time.Now(), false)
}
