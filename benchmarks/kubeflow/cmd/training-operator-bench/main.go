// training-operator-bench runs Kubeflow's PyTorchJob controller and its validating webhook out
// of cluster, for benchmarks/vs_kubeflow.py. It is our own small main around the operator's
// manager, not upstream's: v1.8.1 fixes the client at QPS 20 / burst 30 (controller-runtime's
// default) and the certificate directory at /tmp/k8s-webhook-server, and has no flag for
// either. Here both are flags, so the benchmark can run Kubeflow with its default client limits
// and with them lifted to ours (no client-side limit), and keep its state under the cache.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	"github.com/kubeflow/training-operator/pkg/config"
	"github.com/kubeflow/training-operator/pkg/controller.v1/common"
	pytorchcontroller "github.com/kubeflow/training-operator/pkg/controller.v1/pytorch"
	pytorchwebhook "github.com/kubeflow/training-operator/pkg/webhooks/pytorch"
	schedulerpluginsv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// The rotator injects its CA into the webhook configuration of this name (the same name
// upstream's manifests use, so kubeflow.sh's install and upstream agree).
const webhookConfigName = "validator.training-operator.kubeflow.org"

func main() {
	var (
		metricsAddr, probeAddr, certDir, namespace, secretName, watchNamespace, gangScheduler string
		qps                                                                    float64
		burst, threads, webhookPort                                            int
	)
	flag.Float64Var(&qps, "kube-api-qps", 20, "client QPS (upstream: 20); negative: no client-side limit")
	flag.IntVar(&burst, "kube-api-burst", 30, "client burst (upstream: 30)")
	flag.IntVar(&threads, "controller-threads", 1, "reconcile workers (upstream default: 1)")
	flag.StringVar(&metricsAddr, "metrics-bind-address", "127.0.0.1:0", "Prometheus metrics address")
	flag.StringVar(&probeAddr, "health-probe-bind-address", "127.0.0.1:0", "/healthz and /readyz address")
	flag.IntVar(&webhookPort, "webhook-server-port", 9443, "webhook server port (binds 127.0.0.1)")
	flag.StringVar(&certDir, "cert-dir", "", "where the rotator writes the webhook's serving pair (required)")
	flag.StringVar(&watchNamespace, "namespace", "", "watch only this namespace (upstream's --namespace); empty: all")
	flag.StringVar(&namespace, "secret-namespace", "kubeflow", "namespace of the webhook certificate Secret")
	flag.StringVar(&gangScheduler, "gang-scheduler-name", "", "upstream's flag: the scheduler-plugins scheduler to gang through "+
		"(its PodGroups, pods' schedulerName); empty: no gang. Volcano is not built here")
	flag.StringVar(&secretName, "webhook-secret-name", "training-operator-webhook-cert", "the webhook certificate Secret (must exist)")
	// The worker pods' init container (a wait for the master's DNS name), as upstream's flags default it.
	flag.StringVar(&config.Config.PyTorchInitContainerImage, "pytorch-init-container-image", config.PyTorchInitContainerImageDefault, "")
	flag.StringVar(&config.Config.PyTorchInitContainerTemplateFile, "pytorch-init-container-template-file", config.PyTorchInitContainerTemplateFileDefault, "")
	flag.IntVar(&config.Config.PyTorchInitContainerMaxTries, "pytorch-init-container-max-tries", config.PyTorchInitContainerMaxTriesDefault, "")
	// Upstream runs its logger in development mode (debug level, console); keep that default so
	// the comparison is with Kubeflow as it ships. --zap-devel=false lowers it to info.
	opts := zap.Options{Development: true}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("bench")
	if certDir == "" {
		fail(errors.New("--cert-dir is required"))
	}
	if strings.EqualFold(gangScheduler, "volcano") {
		fail(errors.New("--gang-scheduler-name=volcano: Volcano is not served by the module proxy here; use scheduler-plugins"))
	}

	// --kubeconfig is controller-runtime's own flag (then $KUBECONFIG, as upstream).
	cfg, err := ctrlconfig.GetConfig()
	if err != nil {
		fail(err)
	}
	cfg.QPS, cfg.Burst = float32(qps), burst // client-go builds no rate limiter when QPS < 0

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(kubeflowv1.AddToScheme(scheme))
	utilruntime.Must(schedulerpluginsv1alpha1.AddToScheme(scheme))
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		Cache:                  cacheOptions(watchNamespace, namespace),
		WebhookServer:          webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: webhookPort, CertDir: certDir}),
	})
	if err != nil {
		fail(err)
	}

	// As upstream: the controller and webhook are registered only once the rotator has a valid
	// serving pair on disk and its CA in the webhook configuration.
	certsReady := make(chan struct{})
	err = rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: namespace, Name: secretName},
		CertDir:        certDir,
		CAName:         "training-operator-ca",
		CAOrganization: "training-operator",
		// The API server calls https://localhost:<port>/...: a URL client config, as there is
		// no Service or kube-proxy on the local cluster.
		DNSName:               "localhost",
		IsReady:               certsReady,
		Webhooks:              []rotator.WebhookInfo{{Type: rotator.Validating, Name: webhookConfigName}},
		RequireLeaderElection: false,
	})
	if err != nil {
		fail(err)
	}
	utilruntime.Must(mgr.AddHealthzCheck("healthz", healthz.Ping))
	utilruntime.Must(mgr.AddReadyzCheck("readyz", func(req *http.Request) error {
		select {
		case <-certsReady:
			return mgr.GetWebhookServer().StartedChecker()(req)
		default:
			return errors.New("certificates are not ready")
		}
	}))
	go mountSecret(cfg, namespace, secretName, certDir)
	go func() {
		<-certsReady
		// As upstream's setupControllers: any name but "volcano" is a scheduler-plugins scheduler.
		gang := common.GenNonGangSchedulerSetupFunc()
		if gangScheduler != "" {
			gang = common.GenSchedulerPluginsSetupFunc(mgr.GetClient(), gangScheduler)
		}
		if err := pytorchcontroller.NewReconciler(mgr, gang).SetupWithManager(mgr, threads); err != nil {
			fail(err)
		}
		if err := pytorchwebhook.SetupWebhook(mgr); err != nil {
			fail(err)
		}
		log.Info("pytorchjob controller registered", "threads", threads, "qps", qps, "burst", burst, "gang", gangScheduler)
	}()
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fail(err)
	}
}

// mountSecret does what the kubelet's Secret volume does in a cluster: it keeps certDir's
// tls.crt/tls.key equal to the Secret's, which the rotator fills (the rotator only waits for
// the files). Polling a single Secret every half second costs the benchmark nothing measurable.
func mountSecret(cfg *rest.Config, namespace, name, certDir string) {
	cs := kubernetes.NewForConfigOrDie(cfg)
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		fail(err)
	}
	for {
		s, err := cs.CoreV1().Secrets(namespace).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && len(s.Data["tls.crt"]) > 0 && len(s.Data["tls.key"]) > 0 {
			for _, f := range []string{"tls.key", "tls.crt"} { // key first: the crt's arrival is the signal
				path := filepath.Join(certDir, f)
				if old, _ := os.ReadFile(path); !bytes.Equal(old, s.Data[f]) {
					if err := os.WriteFile(path+".tmp", s.Data[f], 0o600); err != nil {
						fail(err)
					}
					if err := os.Rename(path+".tmp", path); err != nil {
						fail(err)
					}
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// cacheOptions narrows the manager's cache to the watched namespace, plus the Secret's, which
// the rotator reads through the same cache.
func cacheOptions(watch, secretNamespace string) cache.Options {
	if watch == "" {
		return cache.Options{}
	}
	return cache.Options{DefaultNamespaces: map[string]cache.Config{watch: {}, secretNamespace: {}}}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "training-operator-bench:", err)
	os.Exit(1)
}
