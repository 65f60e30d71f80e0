package dev.lms4j.train.corpus;

import dev.lms4j.tf.TrainingGraph;
import dev.lms4j.train.models.ExtraGradients;
import java.util.List;
import org.tensorflow.Operand;
import org.tensorflow.framework.optimizers.Adam;
import org.tensorflow.framework.optimizers.RMSProp;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Placeholder;
import org.tensorflow.op.train.BatchMatMul;
import org.tensorflow.types.TFloat32;
import org.tensorflow.types.TInt32;

/** The sequence families: unrolled LSTM and GRU, and a transformer encoder. */
final class SequenceFamilies {
  private SequenceFamilies() {}

  /**
   * A 2-layer LSTM statically unrolled over {@code steps} steps ({@code Unpack} of the input,
   * one cell per step and layer with the layer's weights shared by every step), a dense layer on
   * the last output, softmax loss; resource variables read once each, so the gradient of a weight
   * is one {@code AddN} of {@code steps} partial gradients; plain SGD.
   */
  static TrainingGraph lstm(boolean small, long seed) {
    return small ? lstm(4, 8, 8, 16, seed) : lstm(16, 50, 64, 256, seed);
  }

  /** The LSTM at a given batch, number of steps, input and hidden width. */
  static TrainingGraph lstm(int batch, int steps, int in, int hidden, long seed) {
    try (Net n = new Net(Net.Vars.RESOURCE, seed)) {
      Ops tf = n.tf;
      Operand<TFloat32> x = n.input("x", Shape.of(batch, steps, in), "normal");
      Operand<TFloat32> labels = n.input("labels", Shape.of(batch, 10), "onehot");
      List<Operand<TFloat32>> xs = tf.unstack(x, (long) steps, org.tensorflow.op.core.Unstack
          .axis(1L)).output().stream().map(o -> (Operand<TFloat32>) o).toList();
      int width = in;
      for (int layer = 0; layer < 2; layer++) {
        Net.Param w = n.normal("lstm" + layer + "_w", Shape.of(width + hidden, 4L * hidden),
            Math.sqrt(1.0 / (width + hidden)));
        Net.Param b = n.filled("lstm" + layer + "_b", Shape.of(4L * hidden), 0f);
        Operand<TFloat32> h = zeros(tf, batch, hidden);
        Operand<TFloat32> c = zeros(tf, batch, hidden);
        List<Operand<TFloat32>> outs = new java.util.ArrayList<>();
        for (Operand<TFloat32> xt : xs) {
          Operand<TFloat32> z = tf.nn.biasAdd(tf.linalg.matMul(tf.concat(List.of(xt, h),
              tf.constant(1)), w.value()), b.value());
          List<Operand<TFloat32>> g = tf.split(tf.constant(1), z, 4L).output().stream()
              .map(o -> (Operand<TFloat32>) o).toList();
          c = tf.math.add(tf.math.mul(tf.math.sigmoid(g.get(1)), c),
              tf.math.mul(tf.math.sigmoid(g.get(0)), tf.math.tanh(g.get(2))));
          h = tf.math.mul(tf.math.sigmoid(g.get(3)), tf.math.tanh(c));
          outs.add(h);
        }
        xs = outs;
        width = hidden;
      }
      Operand<TFloat32> logits = n.dense(xs.get(xs.size() - 1), "out", hidden, 10);
      Operand<TFloat32> loss = n.softmaxLoss(logits, labels);
      return n.finish(n.updates(loss, n.params(), Net.Update.SGD, 0.1f));
    }
  }

  /**
   * A GRU statically unrolled over {@code steps} steps, with a shared output layer applied at
   * every step (the loss sums the per-step losses), trained with
   * {@code org.tensorflow.framework.optimizers.RMSProp} on ref variables.
   */
  static TrainingGraph gru(boolean small, long seed) {
    return small ? gru(4, 6, 8, 16, seed) : gru(16, 40, 64, 256, seed);
  }

  /** The GRU at a given batch, number of steps, input and hidden width. */
  static TrainingGraph gru(int batch, int steps, int in, int hidden, long seed) {
    try (Net n = new Net(Net.Vars.REF, seed)) {
      Ops tf = n.tf;
      Operand<TFloat32> x = n.input("x", Shape.of(batch, steps, in), "normal");
      Operand<TFloat32> labels = n.input("labels", Shape.of(batch, 10), "onehot");
      List<Operand<TFloat32>> xs = tf.unstack(x, (long) steps, org.tensorflow.op.core.Unstack
          .axis(1L)).output().stream().map(o -> (Operand<TFloat32>) o).toList();
      Net.Param wg = n.normal("gru_gates_w", Shape.of(in + hidden, 2L * hidden),
          Math.sqrt(1.0 / (in + hidden)));
      Net.Param bg = n.filled("gru_gates_b", Shape.of(2L * hidden), 1f);
      Net.Param wc = n.normal("gru_cand_w", Shape.of(in + hidden, hidden),
          Math.sqrt(1.0 / (in + hidden)));
      Net.Param bc = n.filled("gru_cand_b", Shape.of(hidden), 0f);
      Net.Param wo = n.he("out_w", Shape.of(hidden, 10), hidden);
      Net.Param bo = n.filled("out_b", Shape.of(10), 0f);
      Operand<TFloat32> h = zeros(tf, batch, hidden);
      Operand<TFloat32> total = null;
      Operand<TFloat32> one = tf.constant(1f);
      for (Operand<TFloat32> xt : xs) {
        Operand<TFloat32> gates = tf.math.sigmoid(tf.nn.biasAdd(tf.linalg.matMul(
            tf.concat(List.of(xt, h), tf.constant(1)), wg.value()), bg.value()));
        List<Operand<TFloat32>> ru = tf.split(tf.constant(1), gates, 2L).output().stream()
            .map(o -> (Operand<TFloat32>) o).toList();
        Operand<TFloat32> cand = tf.math.tanh(tf.nn.biasAdd(tf.linalg.matMul(
            tf.concat(List.of(xt, tf.math.mul(ru.get(0), h)), tf.constant(1)), wc.value()),
            bc.value()));
        h = tf.math.add(tf.math.mul(ru.get(1), h),
            tf.math.mul(tf.math.sub(one, ru.get(1)), cand));
        Operand<TFloat32> logits = tf.nn.biasAdd(tf.linalg.matMul(h, wo.value()), bo.value());
        Operand<TFloat32> xent = tf.nn.softmaxCrossEntropyWithLogits(logits, labels).loss();
        Operand<TFloat32> stepLoss = tf.math.mean(xent, tf.constant(new int[] {0}));
        total = total == null ? stepLoss : tf.math.add(total, stepLoss);
      }
      Operand<TFloat32> loss = tf.withName("loss").math.div(total, tf.constant((float) steps));
      new RMSProp(n.graph, 0.001f).minimize(loss, "train_op");
      return n.finishInitOnly();
    }
  }

  /**
   * A BERT-style encoder: token embedding ({@code GatherV2} of int32 ids, fill {@code ids}) plus
   * a learned position embedding, {@code layers} pre-norm blocks of multi-head self-attention
   * (batch matmuls, softmax) and a tanh-GELU MLP, a final layer norm and logits over the
   * vocabulary against one-hot labels per token; trained with
   * {@code org.tensorflow.framework.optimizers.Adam}, which puts control edges from every
   * gradient on every update.
   */
  static TrainingGraph encoder(boolean small, long seed) {
    return small ? encoder(2, 16, 32, 2, 2, 64, seed) : encoder(8, 128, 128, 4, 4, 4000, seed);
  }

  /** The encoder at a given batch, sequence length, width, heads, layers and vocabulary. */
  static TrainingGraph encoder(int batch, int seq, int width, int heads, int layers, int vocab,
      long seed) {
    ExtraGradients.register(); // BatchMatMulV3's gradient
    int dh = width / heads;
    long tokens = (long) batch * seq;
    try (Net n = new Net(Net.Vars.REF, seed)) {
      Ops tf = n.tf;
      Tokens in = tokens(n, batch, seq, width, vocab);
      Operand<TFloat32> labels = in.labels();
      Operand<TFloat32> h = in.embedded();
      h = tf.reshape(h, tf.constant(new long[] {tokens, width}));
      float scale = (float) (1 / Math.sqrt(dh));
      for (int l = 0; l < layers; l++) {
        String p = "enc" + l;
        Operand<TFloat32> a = layerNorm(n, p + "_ln1", h, width);
        Operand<TFloat32> qkv = n.dense(a, p + "_qkv", width, 3L * width);
        List<Operand<TFloat32>> parts = tf.split(tf.constant(1), qkv, 3L).output().stream()
            .map(o -> (Operand<TFloat32>) o).toList();
        Operand<TFloat32> q = heads(tf, parts.get(0), batch, seq, heads, dh);
        Operand<TFloat32> k = heads(tf, parts.get(1), batch, seq, heads, dh);
        Operand<TFloat32> v = heads(tf, parts.get(2), batch, seq, heads, dh);
        Operand<TFloat32> scores = tf.math.mul(tf.train.batchMatMul(q, k, TFloat32.class,
            BatchMatMul.adjY(true)), tf.constant(scale));
        Operand<TFloat32> probs = tf.nn.softmax(scores);
        Operand<TFloat32> ctx = tf.train.batchMatMul(probs, v, TFloat32.class);
        ctx = tf.reshape(tf.linalg.transpose(ctx, tf.constant(new int[] {0, 2, 1, 3})),
            tf.constant(new long[] {tokens, width}));
        h = tf.math.add(h, n.dense(ctx, p + "_proj", width, width));
        Operand<TFloat32> m = layerNorm(n, p + "_ln2", h, width);
        m = gelu(tf, n.dense(m, p + "_fc1", width, 4L * width));
        h = tf.math.add(h, n.dense(m, p + "_fc2", 4L * width, width));
      }
      h = layerNorm(n, "final_ln", h, width);
      Operand<TFloat32> logits = n.dense(h, "lm_head", width, vocab);
      Operand<TFloat32> loss = n.softmaxLoss(logits, labels);
      new Adam(n.graph, 0.001f).minimize(loss, "train_op");
      return n.finishInitOnly();
    }
  }

  /**
   * A transformer encoder written with {@code tf.linalg.einsum}, as Keras' {@code
   * MultiHeadAttention} writes it: query, key and value projections {@code abc,cde->abde}
   * (weights [width, heads, dh]), scores {@code aecd,abcd->acbe} (key, query), context
   * {@code acbe,aecd->abcd} (probabilities, value), output projection {@code abcd,cde->abe},
   * the feed-forward layers {@code abc,cd->abd}; layer norms, tanh-GELU, a softmax over the
   * vocabulary per token, the framework's Adam. Einsums whose operands or output are not in
   * the order their batched product reads or writes copy them (the scores' key and query, the
   * scores themselves).
   */
  static TrainingGraph encoderEinsum(boolean small, long seed) {
    return small ? encoderEinsum(2, 16, 32, 2, 2, 64, seed)
        : encoderEinsum(8, 128, 128, 4, 2, 2000, seed);
  }

  /** The einsum encoder at a given batch, sequence length, width, heads, layers, vocabulary. */
  static TrainingGraph encoderEinsum(int batch, int seq, int width, int heads, int layers,
      int vocab, long seed) {
    int dh = width / heads;
    long tokens = (long) batch * seq;
    try (Net n = new Net(Net.Vars.REF, seed)) {
      Ops tf = n.tf;
      Tokens in = tokens(n, batch, seq, width, vocab);
      Operand<TFloat32> labels = in.labels();
      Operand<TFloat32> h = in.embedded();
      float scale = (float) (1 / Math.sqrt(dh));
      for (int l = 0; l < layers; l++) {
        String p = "enc" + l;
        Operand<TFloat32> a = layerNorm(n, p + "_ln1", h, width, 2);
        Operand<TFloat32> q = einsum(tf, "abc,cde->abde", a,
            n.he(p + "_q", Shape.of(width, heads, dh), width).value());
        Operand<TFloat32> k = einsum(tf, "abc,cde->abde", a,
            n.he(p + "_k", Shape.of(width, heads, dh), width).value());
        Operand<TFloat32> v = einsum(tf, "abc,cde->abde", a,
            n.he(p + "_v", Shape.of(width, heads, dh), width).value());
        Operand<TFloat32> scores = tf.math.mul(einsum(tf, "aecd,abcd->acbe", k, q),
            tf.constant(scale));
        Operand<TFloat32> probs = tf.nn.softmax(scores);
        Operand<TFloat32> ctx = einsum(tf, "acbe,aecd->abcd", probs, v);
        h = tf.math.add(h, einsum(tf, "abcd,cde->abe", ctx,
            n.he(p + "_o", Shape.of(heads, dh, width), width).value()));
        Operand<TFloat32> m = layerNorm(n, p + "_ln2", h, width, 2);
        m = gelu(tf, einsum(tf, "abc,cd->abd", m,
            n.he(p + "_fc1", Shape.of(width, 4L * width), width).value()));
        h = tf.math.add(h, einsum(tf, "abc,cd->abd", m,
            n.he(p + "_fc2", Shape.of(4L * width, width), 4L * width).value()));
      }
      h = layerNorm(n, "final_ln", h, width, 2);
      Operand<TFloat32> logits = tf.reshape(einsum(tf, "abc,cd->abd", h,
          n.he("lm_head", Shape.of(width, vocab), width).value()),
          tf.constant(new long[] {tokens, vocab}));
      Operand<TFloat32> loss = n.softmaxLoss(logits, labels);
      new Adam(n.graph, 0.001f).minimize(loss, "train_op");
      return n.finishInitOnly();
    }
  }

  private static Operand<TFloat32> einsum(Ops tf, String equation, Operand<TFloat32> x,
      Operand<TFloat32> y) {
    return tf.linalg.einsum(List.of(x, y), equation);
  }

  /**
   * The encoders' inputs: the token ids' feed, the one-hot labels per token, and the token
   * embeddings plus the position embeddings, [batch, seq, width].
   */
  private record Tokens(Operand<TFloat32> labels, Operand<TFloat32> embedded) {}

  private static Tokens tokens(Net n, int batch, int seq, int width, int vocab) {
    Ops tf = n.tf;
    Placeholder<TInt32> ids = n.ids("tokens", Shape.of(batch, seq), vocab);
    Operand<TFloat32> labels = n.input("labels", Shape.of((long) batch * seq, vocab), "onehot");
    Net.Param emb = n.normal("tok_emb", Shape.of(vocab, width), 0.02);
    Net.Param pos = n.normal("pos_emb", Shape.of(seq, width), 0.02);
    return new Tokens(labels, tf.math.add(tf.gather(emb.value(), ids, tf.constant(0)),
        pos.value()));
  }

  /** {@code [tokens, width]} to {@code [batch, heads, seq, dh]}. */
  private static Operand<TFloat32> heads(Ops tf, Operand<TFloat32> x, int batch, int seq,
      int heads, int dh) {
    return tf.linalg.transpose(tf.reshape(x, tf.constant(new long[] {batch, seq, heads, dh})),
        tf.constant(new int[] {0, 2, 1, 3}));
  }

  /** Layer norm over the last axis of a rank-2 tensor with a learned scale and offset. */
  private static Operand<TFloat32> layerNorm(Net n, String name, Operand<TFloat32> x, int width) {
    return layerNorm(n, name, x, width, 1);
  }

  /** Layer norm over {@code lastAxis}, the last axis of {@code x}. */
  private static Operand<TFloat32> layerNorm(Net n, String name, Operand<TFloat32> x, int width,
      int lastAxis) {
    Ops tf = n.tf;
    Net.Param g = n.filled(name + "_g", Shape.of(width), 1f);
    Net.Param b = n.filled(name + "_b", Shape.of(width), 0f);
    Operand<TInt32> axis = tf.constant(new int[] {lastAxis});
    Operand<TFloat32> mean = tf.math.mean(x, axis, org.tensorflow.op.math.Mean.keepDims(true));
    Operand<TFloat32> d = tf.math.sub(x, mean);
    Operand<TFloat32> var = tf.math.mean(tf.math.mul(d, d), axis,
        org.tensorflow.op.math.Mean.keepDims(true));
    Operand<TFloat32> norm = tf.math.mul(d, tf.math.rsqrt(tf.math.add(var, tf.constant(1e-5f))));
    return tf.math.add(tf.math.mul(norm, g.value()), b.value());
  }

  /** The tanh approximation of GELU. */
  private static Operand<TFloat32> gelu(Ops tf, Operand<TFloat32> x) {
    Operand<TFloat32> cube = tf.math.mul(tf.math.mul(x, x), x);
    Operand<TFloat32> inner = tf.math.mul(tf.constant((float) Math.sqrt(2 / Math.PI)),
        tf.math.add(x, tf.math.mul(tf.constant(0.044715f), cube)));
    return tf.math.mul(tf.math.mul(tf.constant(0.5f), x),
        tf.math.add(tf.constant(1f), tf.math.tanh(inner)));
  }

  private static Operand<TFloat32> zeros(Ops tf, int batch, int hidden) {
    return tf.fill(tf.constant(new long[] {batch, hidden}), tf.constant(0f));
  }
}
