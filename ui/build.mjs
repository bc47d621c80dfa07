// Bundles each view into one ES module under airflow_t9k/ui/static. React, Chakra and the rest
// are not bundled: the Airflow UI publishes its own copies on globalThis, and a second React
// would break hooks. Each import of those packages becomes a read of that global.
import * as esbuild from "esbuild";

const HOST = {
  react: "React",
  "react/jsx-runtime": "ReactJSXRuntime",
  "react-dom": "ReactDOM",
  "@chakra-ui/react": "ChakraUI",
};

const fromHost = {
  name: "from-airflow-host",
  setup(build) {
    build.onResolve({ filter: /^(react|react\/jsx-runtime|react-dom|@chakra-ui\/react)$/ }, (args) => ({
      path: args.path,
      namespace: "host",
    }));
    build.onLoad({ filter: /.*/, namespace: "host" }, (args) => ({
      contents: `const g = globalThis[${JSON.stringify(HOST[args.path])}];
if (!g) throw new Error("the Airflow UI did not provide ${HOST[args.path]}");
module.exports = g;`,
      loader: "js",
    }));
  },
};

await esbuild.build({
  entryPoints: { jobs: "src/jobs.jsx", task: "src/task.jsx" },
  outdir: process.env.T9K_UI_OUT || "../airflow_t9k/ui/static",
  bundle: true,
  format: "esm",
  target: "es2020",
  jsx: "automatic",
  minify: true,
  legalComments: "none",
  charset: "utf8",
  define: { "process.env.NODE_ENV": '"production"' },
  plugins: [fromHost],
  logLevel: "info",
});
