package certs

// The certificate machinery reads (and in self-managed mode writes) its one Secret, and in
// self-managed mode patches the caBundle of the webhook configurations.
//
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=get;list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=patch,resourceNames=gitops-reverser
