"""TensorFlow MultiWorkerMirroredStrategy driven by TF_CONFIG alone.

Every worker computes a per-replica value in a distributed step and all-reduces it across
workers; then a small Keras model trains a few steps under the strategy. Prints
``result task=<type>:<index> workers=N allreduce=S loss=L``.
"""

import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf

config = json.loads(os.environ["TF_CONFIG"])
task = config["task"]
strategy = tf.distribute.MultiWorkerMirroredStrategy()
workers = strategy.num_replicas_in_sync
print(f"task {task['type']}:{task['index']} cluster={config['cluster']} replicas_in_sync={workers}", flush=True)


@tf.function
def step():
    ctx = tf.distribute.get_replica_context()
    value = tf.cast(ctx.replica_id_in_sync_group + 1, tf.float32)
    return ctx.all_reduce(tf.distribute.ReduceOp.SUM, value)


total = strategy.reduce(tf.distribute.ReduceOp.MEAN, strategy.run(step), axis=None).numpy()
rng = np.random.default_rng(0)
x = rng.normal(size=(256, 4)).astype("float32")
y = (x @ np.arange(1, 5, dtype="float32")).reshape(-1, 1)
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(4,))])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.05), loss="mse")
history = model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(32).repeat(), epochs=3, steps_per_epoch=8, verbose=0)
loss = history.history["loss"][-1]
print(f"result task={task['type']}:{task['index']} workers={workers} allreduce={total:g} loss={loss:.6f}", flush=True)
