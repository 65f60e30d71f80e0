package dev.lms4j.train.models;

import dev.lms4j.tf.Manifest;
import dev.lms4j.tf.TrainingGraph;
import java.util.List;
import org.tensorflow.Operand;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Placeholder;
import org.tensorflow.op.linalg.MatMul;
import org.tensorflow.op.math.Mean;
import org.tensorflow.op.train.BatchMatMul;
import org.tensorflow.types.TFloat32;
import org.tensorflow.types.TInt32;
import org.tensorflow.types.TInt64;

/**
 * {@code gpt2}: a GPT-2-style decoder-only transformer (Radford et al. 2019) trained on
 * next-token prediction.
 *
 * <p>Layout: token embedding {@code wte [vocab, width]} plus learned position embedding
 * {@code wpe [seq, width]}; {@code layers} pre-LN blocks, each
 * {@code h += proj(causal_attention(ln_1(h)))} with {@code heads} heads and
 * {@code h += mlp(ln_2(h))} with a {@code 4 width} hidden layer and the tanh GELU; a final layer
 * norm; logits {@code h . wte^T} (tied embeddings). The loss is the mean softmax cross entropy
 * of each position's logits against the next token; the metric {@code accuracy} is the share of
 * positions whose argmax is the next token. Dropout is left out (random ops). Initialisation as
 * GPT-2: normal(0.02), position embedding normal(0.01), the residual projections scaled by
 * {@code 1/sqrt(2 layers)}, layer norms 1 and 0.
 *
 * <p>Tokens: the feed {@code x} is float32 {@code [batch, seq + 1]} with fill {@code uniform};
 * the graph turns each value {@code u} in {@code [0, 1)} into the token id
 * {@code min(floor(u * vocab), vocab - 1)} (exact for vocabularies below 2^24). Every float32
 * feeder of lms4j (the trainer's synthetic dataset, the budgeted runner's synthetic feeds) so
 * produces valid, uniformly distributed ids; positions {@code 0..seq-1} are the input and
 * {@code 1..seq} the targets.
 *
 * <p>Options: {@code layers} (default 2), {@code width} (64), {@code heads} (4), {@code seq}
 * (32), {@code vocab} (256), SGD step {@code lr} (0.05) and {@code seed} (42). GPT-2 small is
 * {@code layers=12 width=768 heads=12 seq=1024 vocab=50257}: 124,439,808 parameters.
 */
final class Gpt2Model extends ZooModel {

  private static final String NAME = "gpt2";
  private static final float LN_EPSILON = 1e-5f;

  Gpt2Model() {
    super(NAME, "GPT-2-style decoder-only transformer: token + position embeddings, <layers> "
        + "pre-LN blocks (causal <heads>-head attention, GELU MLP), tied output embedding, "
        + "next-token loss; GPT-2 small is layers=12 width=768 heads=12 seq=1024 vocab=50257",
        "layers", "2", "width", "64", "heads", "4", "seq", "32", "vocab", "256", "lr", "0.05",
        "seed", "42");
  }

  @Override
  public int defaultBatch() {
    return 4;
  }

  @Override
  TrainingGraph graph(int batch, Options o) {
    int layers = o.intValue("layers", 1, 1000);
    int width = o.intValue("width", 1, 1 << 16);
    int heads = o.intValue("heads", 1, 1 << 10);
    int seq = o.intValue("seq", 1, 1 << 20);
    int vocab = o.intValue("vocab", 2, 1 << 24);
    if (width % heads != 0) {
      throw new IllegalArgumentException(NAME + ": width must be a multiple of heads, got width "
          + width + " and " + heads + " heads");
    }
    ExtraGradients.register();
    long rows = (long) batch * seq;
    int head = width / heads;

    try (GraphBuilder b = builder(o)) {
      Ops tf = b.ops();
      Placeholder<TFloat32> x = b.placeholder("x", Shape.of(batch, seq + 1));
      Ops tok = tf.withSubScope("tokens");
      Operand<TInt32> ids = tok.math.minimum(
          tok.dtypes.cast(tok.math.floor(tok.math.mul(x, tok.constant((float) vocab))),
              TInt32.class),
          tok.constant(vocab - 1));
      Operand<TInt32> inputs = tok.withName("inputs").slice(ids, tok.constant(new int[] {0, 0}),
          tok.constant(new int[] {batch, seq}));
      Operand<TInt32> targets = tok.withName("targets").reshape(
          tok.slice(ids, tok.constant(new int[] {0, 1}), tok.constant(new int[] {batch, seq})),
          tok.constant(new long[] {rows}));

      Ops net = tf.withSubScope(NAME);
      var wte = b.normalWeight(net, "wte", Shape.of(vocab, width), 0.02);
      var wpe = b.normalWeight(net, "wpe", Shape.of(seq, width), 0.01);
      Ops emb = net.withSubScope("embed");
      Operand<TFloat32> h = emb.math.add(emb.gather(wte, inputs, emb.constant(0)), wpe);
      h = emb.reshape(h, emb.constant(new long[] {rows, width}));

      // causal mask, [seq, seq]: 0 on and below the diagonal, -1e9 above it
      Ops m = net.withSubScope("mask");
      Operand<TFloat32> lower = m.linalg.bandPart(
          m.fill(m.constant(new long[] {seq, seq}), m.constant(1f)), m.constant(-1L),
          m.constant(0L));
      Operand<TFloat32> mask = m.withName("bias").math.mul(m.math.sub(lower, m.constant(1f)),
          m.constant(1e9f));

      double residualStd = 0.02 / Math.sqrt(2.0 * layers);
      for (int l = 0; l < layers; l++) {
        Ops blk = net.withSubScope("h" + l);
        Ops attn = blk.withSubScope("attn");
        Operand<TFloat32> a = layerNorm(b, blk.withSubScope("ln_1"), h, width);
        Operand<TFloat32> qkv = linear(b, attn.withSubScope("c_attn"), a, width, 3 * width,
            0.02);
        List<Operand<TFloat32>> parts = attn.split(attn.constant(1), qkv, 3L).output().stream()
            .map(p -> heads(attn, p, batch, seq, heads, head)).toList();
        Operand<TFloat32> scores = attn.math.mul(
            attn.train.batchMatMul(parts.get(0), parts.get(1), TFloat32.class,
                BatchMatMul.adjY(true)),
            attn.constant((float) (1.0 / Math.sqrt(head))));
        Operand<TFloat32> probs = attn.nn.softmax(attn.math.add(scores, mask));
        Operand<TFloat32> ctx = attn.train.batchMatMul(probs, parts.get(2), TFloat32.class);
        ctx = attn.reshape(attn.linalg.transpose(ctx, attn.constant(new int[] {0, 2, 1, 3})),
            attn.constant(new long[] {rows, width}));
        h = blk.withName("add_attn").math.add(h,
            linear(b, attn.withSubScope("c_proj"), ctx, width, width, residualStd));

        Ops mlp = blk.withSubScope("mlp");
        Operand<TFloat32> f = layerNorm(b, blk.withSubScope("ln_2"), h, width);
        f = gelu(mlp, linear(b, mlp.withSubScope("c_fc"), f, width, 4 * width, 0.02));
        h = blk.withName("add_mlp").math.add(h,
            linear(b, mlp.withSubScope("c_proj"), f, 4 * width, width, residualStd));
      }
      h = layerNorm(b, net.withSubScope("ln_f"), h, width);
      Ops out = net.withSubScope("logits");
      Operand<TFloat32> logits = out.linalg.matMul(h, wte, MatMul.transposeB(true));

      Operand<TFloat32> onehot = out.oneHot(targets, out.constant(vocab), out.constant(1f),
          out.constant(0f));
      Operand<TFloat32> xent = tf.nn.softmaxCrossEntropyWithLogits(logits, onehot).loss();
      Operand<TFloat32> loss = tf.withName("loss").math.mean(xent, tf.constant(new int[] {0}));
      b.accuracyOfIds(out.math.argMax(logits, out.constant(1)),
          out.dtypes.cast(targets, TInt64.class));
      return b.finish(NAME, List.of(GraphBuilder.feed(x, "uniform")), loss);
    }
  }

  /** {@code [rows, width]} to {@code [batch, heads, seq, head]}. */
  private static Operand<TFloat32> heads(Ops tf, Operand<TFloat32> t, int batch, int seq,
      int heads, int head) {
    return tf.linalg.transpose(tf.reshape(t, tf.constant(new long[] {batch, seq, heads, head})),
        tf.constant(new int[] {0, 2, 1, 3}));
  }

  /** {@code in . kernel + bias} with a normal(stddev) kernel and a zero bias. */
  private static Operand<TFloat32> linear(GraphBuilder b, Ops layer, Operand<TFloat32> in,
      int cin, int cout, double stddev) {
    var kernel = b.normalWeight(layer, "kernel", Shape.of(cin, cout), stddev);
    var bias = b.zeros(layer, "bias", Shape.of(cout));
    return layer.nn.biasAdd(layer.linalg.matMul(in, kernel), bias);
  }

  /** Layer norm over the last axis of {@code [rows, width]}, with scale and offset. */
  private static Operand<TFloat32> layerNorm(GraphBuilder b, Ops ln, Operand<TFloat32> in,
      int width) {
    var gamma = b.ones(ln, "gamma", Shape.of(width));
    var beta = b.zeros(ln, "beta", Shape.of(width));
    Operand<TInt32> last = ln.constant(new int[] {1});
    Operand<TFloat32> mean = ln.math.mean(in, last, Mean.keepDims(true));
    Operand<TFloat32> var = ln.math.mean(ln.math.squaredDifference(in, mean), last,
        Mean.keepDims(true));
    Operand<TFloat32> norm = ln.math.mul(ln.math.sub(in, mean),
        ln.math.rsqrt(ln.math.add(var, ln.constant(LN_EPSILON))));
    return ln.math.add(ln.math.mul(norm, gamma), beta);
  }

  /** GELU, tanh form: {@code 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))}. */
  private static Operand<TFloat32> gelu(Ops tf, Operand<TFloat32> x) {
    Operand<TFloat32> cube = tf.math.mul(tf.math.mul(x, x), x);
    Operand<TFloat32> inner = tf.math.mul(tf.constant((float) Math.sqrt(2 / Math.PI)),
        tf.math.add(x, tf.math.mul(tf.constant(0.044715f), cube)));
    return tf.withName("gelu").math.mul(tf.math.mul(tf.constant(0.5f), x),
        tf.math.add(tf.constant(1f), tf.math.tanh(inner)));
  }
}
