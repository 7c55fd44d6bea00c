#include "core/train/trainer.h"

#include <ATen/ATen.h>
#include <torch/optim/adamw.h>
#include <torch/serialize.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/json_error.h"
#include "core/safe_file.h"
#include "core/eval/corpus.h"
#include "core/eval/vocabulary.h"
#include "core/model/device_internal.h"
#include "core/model/model_impl.h"
#include "core/model/rope.h"
#include "core/model/safetensors.h"
#include "core/model/weights.h"

namespace kvlens {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr double kInitStd = 0.02;
constexpr double kNormEps = 1e-5;

uint64_t splitmix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

int64_t bundledVocabSize() {
    const int64_t n = eval::Vocabulary::bundled().size();
    return (n + 7) / 8 * 8;  // a spare row or few; keeps matmul shapes aligned
}

// Every trainable tensor in file order with its shape (the names and layouts
// loadLlamaLayer reads).
std::vector<std::pair<std::string, std::vector<int64_t>>> parameterShapes(const ModelConfig& c) {
    const int64_t E = c.hiddenSize, D = c.headDim, Hq = c.numHeads, Hkv = c.numKvHeads, F = c.intermediateSize;
    std::vector<std::pair<std::string, std::vector<int64_t>>> s;
    s.push_back({"model.embed_tokens.weight", {c.vocabSize, E}});
    for (int64_t i = 0; i < c.numLayers; ++i) {
        const std::string p = "model.layers." + std::to_string(i) + ".";
        s.push_back({p + "input_layernorm.weight", {E}});
        s.push_back({p + "self_attn.q_proj.weight", {Hq * D, E}});
        s.push_back({p + "self_attn.k_proj.weight", {Hkv * D, E}});
        s.push_back({p + "self_attn.v_proj.weight", {Hkv * D, E}});
        s.push_back({p + "self_attn.o_proj.weight", {E, Hq * D}});
        s.push_back({p + "post_attention_layernorm.weight", {E}});
        s.push_back({p + "mlp.gate_proj.weight", {F, E}});
        s.push_back({p + "mlp.up_proj.weight", {F, E}});
        s.push_back({p + "mlp.down_proj.weight", {E, F}});
    }
    s.push_back({"model.norm.weight", {E}});
    return s;
}

bool endsWith(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Builds m.model over m.parameters (no copies: the Weights share storage).
void assemble(TrainableModel& m) {
    std::map<std::string, at::Tensor> byName(m.parameters.begin(), m.parameters.end());
    Weights w;
    w.embed = byName.at("model.embed_tokens.weight");
    w.layers.resize(m.config.numLayers);
    for (int64_t i = 0; i < m.config.numLayers; ++i) {
        const std::string p = "model.layers." + std::to_string(i) + ".";
        LayerWeights& lw = w.layers[i];
        lw.attnNorm = byName.at(p + "input_layernorm.weight");
        lw.wq = byName.at(p + "self_attn.q_proj.weight");
        lw.wk = byName.at(p + "self_attn.k_proj.weight");
        lw.wv = byName.at(p + "self_attn.v_proj.weight");
        lw.wo = byName.at(p + "self_attn.o_proj.weight");
        lw.mlpNorm = byName.at(p + "post_attention_layernorm.weight");
        lw.wGate = byName.at(p + "mlp.gate_proj.weight");
        lw.wUp = byName.at(p + "mlp.up_proj.weight");
        lw.wDown = byName.at(p + "mlp.down_proj.weight");
    }
    w.finalNorm = byName.at("model.norm.weight");
    w.lmHead = w.embed;  // tied
    m.model = Model::fromWeights(m.config, w, at::kCPU);
}

json optionsJson(const TrainOptions& o) {
    return {{"seed", o.seed}, {"steps", o.steps}, {"batch", o.batch}, {"curriculum", o.curriculum},
            {"lr", o.lr}, {"min_lr", o.minLr}, {"warmup_steps", o.warmupSteps}, {"weight_decay", o.weightDecay},
            {"grad_clip", o.gradClip}, {"needle_fraction", o.needleFraction}, {"mix", o.mix},
            {"needle_mix", o.needleMix}, {"init_from", o.initFrom},
            {"answer_weight", o.answerWeight}, {"positional_heads", o.positionalHeads},
            {"checkpoint_every", o.checkpointEvery}, {"until", o.until}, {"threads", o.threads},
            {"save_dtype", o.saveDtype == SaveDtype::F32 ? "f32" : o.saveDtype == SaveDtype::BF16 ? "bf16" : "auto"},
            {"layers", o.layers}, {"hidden", o.hidden}, {"heads", o.heads}, {"kv_heads", o.kvHeads},
            {"intermediate", o.intermediate}, {"max_positions", o.maxPositions}, {"rope_theta", o.ropeTheta}};
}

TrainOptions optionsFromJson(const json& j, const fs::path& dir) {
    TrainOptions o;
    o.outDir = dir;
    o.seed = j.at("seed"); o.steps = j.at("steps"); o.batch = j.at("batch");
    o.curriculum = j.at("curriculum"); o.lr = j.at("lr"); o.minLr = j.at("min_lr");
    o.warmupSteps = j.at("warmup_steps"); o.weightDecay = j.at("weight_decay"); o.gradClip = j.at("grad_clip");
    o.needleFraction = j.at("needle_fraction"); o.checkpointEvery = j.at("checkpoint_every");
    o.mix = j.value("mix", std::string());  // absent in checkpoints written before the option existed
    o.needleMix = j.value("needle_mix", std::string());
    o.initFrom = j.value("init_from", std::string());
    o.answerWeight = j.value("answer_weight", 1.0);
    o.positionalHeads = j.value("positional_heads", std::string());
    o.threads = j.at("threads");
    o.until = j.value("until", int64_t{0});
    const std::string d = j.at("save_dtype");
    o.saveDtype = d == "f32" ? SaveDtype::F32 : d == "bf16" ? SaveDtype::BF16 : SaveDtype::Auto;
    o.layers = j.at("layers"); o.hidden = j.at("hidden"); o.heads = j.at("heads"); o.kvHeads = j.at("kv_heads");
    o.intermediate = j.at("intermediate"); o.maxPositions = j.at("max_positions"); o.ropeTheta = j.at("rope_theta");
    return o;
}

fs::path checkpointDir(const fs::path& out) { return out / "checkpoint"; }

json readState(const fs::path& out) {
    fs::path dir = checkpointDir(out);
    // A crash between the two renames of writeCheckpoint leaves only the old one.
    if (!fs::exists(dir / "state.json") && fs::exists(out / "checkpoint.old" / "state.json")) {
        fs::rename(out / "checkpoint.old", dir);
    }
    std::ifstream in(dir / "state.json");
    if (!in) throw ArgumentError((dir / "state.json").string() + ": no checkpoint to resume from");
    try {
        return json::parse(in);
    } catch (const json::exception& e) {
        throw FormatError((dir / "state.json").string(), jsonErrorText(e.what()));
    }
}

// Options that change what an uninterrupted run computes must not change on resume.
void checkResumable(const TrainOptions& o, const json& storedOptions, const fs::path& file) {
    json now = optionsJson(o);
    const json stored = optionsJson(optionsFromJson(storedOptions, o.outDir));  // defaults for newer keys
    std::string diff;
    for (auto it = now.begin(); it != now.end(); ++it) {
        const std::string& k = it.key();
        if (k == "steps" || k == "until" || k == "threads" || k == "checkpoint_every") continue;
        if (!stored.contains(k) || stored[k] != it.value())
            diff += (diff.empty() ? "" : ", ") + k + " (checkpoint " + (stored.contains(k) ? stored[k].dump() : "-") +
                    ", now " + it.value().dump() + ")";
    }
    if (!diff.empty()) throw ArgumentError(file.string() + ": the options differ from the checkpoint's: " + diff);
}

void writeCheckpoint(const TrainOptions& o, const TrainableModel& m, torch::optim::AdamW& opt, int64_t done) {
    const fs::path tmp = o.outDir / "checkpoint.tmp", dir = checkpointDir(o.outDir), old = o.outDir / "checkpoint.old";
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    writeModelDir(m, tmp, /*bf16=*/false);  // exact f32: what a resumed run continues from
    torch::save(opt, (tmp / "optimizer.pt").string());
    writeFileAtomically(tmp / "state.json", json{{"step", done}, {"options", optionsJson(o)}}.dump(2) + "\n");
    fs::remove_all(old);
    if (fs::exists(dir)) fs::rename(dir, old);
    fs::rename(tmp, dir);
    fs::remove_all(old);

    int64_t numel = 0;
    for (const auto& p : m.parameters) numel += p.second.numel();
    const bool bf16 = o.saveDtype == SaveDtype::BF16 ||
                      (o.saveDtype == SaveDtype::Auto && uint64_t(numel) * 4 > kMaxModelBytes);
    writeModelDir(m, o.outDir, bf16);
}

const char* kCsvHeader = "step,seq_len,lr,loss,fact_acc,seconds,tokens_per_s,answer_acc";

// A fresh log, or on resume the log cut back to the checkpoint's step (the
// interrupted run may have logged steps past it).
std::ofstream openLog(const fs::path& file, int64_t keepUpTo) {
    std::vector<std::string> kept{kCsvHeader};
    if (keepUpTo > 0) {
        std::ifstream in(file);
        std::string line;
        std::getline(in, line);
        while (std::getline(in, line))
            if (!line.empty() && std::stoll(line.substr(0, line.find(','))) <= keepUpTo) kept.push_back(line);
    }
    std::string text;
    for (const auto& l : kept) text += l + "\n";
    writeFileAtomically(file, text);
    std::ofstream out(file, std::ios::app);
    if (!out) throw IoError("cannot write " + file.string());
    return out;
}

void validate(const TrainOptions& o) {
    if (o.outDir.empty()) throw ArgumentError("train: give an output directory");
    if (o.steps <= 0 || o.batch <= 0 || o.checkpointEvery <= 0)
        throw ArgumentError("train: steps, batch and the checkpoint interval must be positive");
    if (o.until < 0 || o.until > o.steps)
        throw ArgumentError("train: --until " + std::to_string(o.until) + " must lie in [0, --steps " +
                            std::to_string(o.steps) + "] (0: no early stop)");
    // Written so that NaN fails each test (a NaN learning rate trained a NaN model and exited 0).
    auto need = [](bool ok, const char* flag, double v, const char* range) {
        if (!ok) throw ArgumentError(std::string("train: ") + flag + " is " + std::to_string(v) + ": expected " + range);
    };
    need(o.lr > 0 && std::isfinite(o.lr), "--lr", o.lr, "a finite number > 0");
    need(o.minLr >= 0 && o.minLr <= o.lr, "--min-lr", o.minLr, "0 to --lr");
    need(o.weightDecay >= 0 && std::isfinite(o.weightDecay), "--weight-decay", o.weightDecay, "a finite number >= 0");
    need(o.gradClip > 0 && std::isfinite(o.gradClip), "--grad-clip", o.gradClip, "a finite number > 0");
    need(o.needleFraction >= 0 && o.needleFraction <= 1, "--needle-fraction", o.needleFraction, "0 to 1");
    need(o.answerWeight > 0 && std::isfinite(o.answerWeight), "--answer-weight", o.answerWeight, "a finite number > 0");
    need(o.ropeTheta > 0 && std::isfinite(o.ropeTheta), "--rope-theta", o.ropeTheta, "a finite number > 0");
    eval::applyCorpusMix({}, o.mix);  // throws naming the bad item
    eval::applyCorpusMix(eval::needleStyleOptions(), o.needleMix);
    parseOffsets(o.positionalHeads);
    for (const auto& s : parseCurriculum(o.curriculum))
        if (s.seqLen > o.maxPositions)
            throw ArgumentError("train: curriculum length " + std::to_string(s.seqLen) + " exceeds max positions " +
                                std::to_string(o.maxPositions));
}

bool allFinite(const std::vector<at::Tensor>& params) {
    at::NoGradGuard noGrad;
    for (const auto& p : params)
        if (!p.isfinite().all().item<bool>()) return false;
    return true;
}

// Scales all gradients so that their global L2 norm is at most maxNorm (our
// own: torch::nn::utils::clip_grad_norm_'s header is not self-contained in 1.13).
void clipGradients(const std::vector<at::Tensor>& params, double maxNorm) {
    at::NoGradGuard noGrad;
    double sq = 0;
    for (const auto& p : params)
        if (p.grad().defined()) sq += p.grad().pow(2).sum().item<double>();
    const double norm = std::sqrt(sq);
    if (norm <= maxNorm) return;
    for (const auto& p : params)
        if (p.grad().defined()) p.grad().mul_(maxNorm / (norm + 1e-6));
}

}  // namespace

std::vector<CurriculumStage> parseCurriculum(const std::string& text) {
    std::vector<CurriculumStage> stages;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        const auto colon = item.find(':');
        try {
            size_t used = 0;
            CurriculumStage s{std::stoll(item.substr(0, colon), &used), INT64_MAX};
            if (colon != std::string::npos) s.untilStep = std::stoll(item.substr(colon + 1));
            if (s.seqLen < 2 || (!stages.empty() && s.untilStep <= stages.back().untilStep) ||
                (!stages.empty() && stages.back().untilStep == INT64_MAX))
                throw std::invalid_argument("order");
            stages.push_back(s);
        } catch (const std::exception&) {
            throw ArgumentError("curriculum: bad stage '" + item + "' in '" + text +
                                "' (expected LEN:UNTIL_STEP,..., LEN >= 2, steps increasing)");
        }
    }
    if (stages.empty()) throw ArgumentError("curriculum: empty");
    return stages;
}

int64_t sequenceLength(const std::vector<CurriculumStage>& stages, int64_t step) {
    for (const auto& s : stages)
        if (step < s.untilStep) return s.seqLen;
    return stages.back().seqLen;
}

double learningRate(const TrainOptions& o, int64_t step) {
    if (step < o.warmupSteps) return o.lr * double(step + 1) / double(o.warmupSteps);
    const double span = std::max<int64_t>(1, o.steps - o.warmupSteps);
    const double t = std::min(1.0, double(step - o.warmupSteps) / span);
    return o.minLr + 0.5 * (o.lr - o.minLr) * (1.0 + std::cos(M_PI * t));
}

std::string configJson(const ModelConfig& c, const std::string& torchDtype) {
    json j = {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"},
              {"vocab_size", c.vocabSize}, {"hidden_size", c.hiddenSize},
              {"intermediate_size", c.intermediateSize}, {"num_hidden_layers", c.numLayers},
              {"num_attention_heads", c.numHeads}, {"num_key_value_heads", c.numKvHeads},
              {"head_dim", c.headDim}, {"max_position_embeddings", c.maxPositions},
              {"rms_norm_eps", c.normEps}, {"rope_theta", c.ropeTheta}, {"rope_scaling", nullptr},
              {"hidden_act", "silu"}, {"attention_bias", false}, {"mlp_bias", false},
              {"tie_word_embeddings", true}, {"initializer_range", kInitStd}, {"use_cache", true},
              {"bos_token_id", eval::kBosId}, {"eos_token_id", eval::kEosId}, {"pad_token_id", eval::kPadId},
              {"torch_dtype", torchDtype}};
    return j.dump(2) + "\n";
}

ModelConfig trainConfig(const TrainOptions& o) {
    ModelConfig c;
    c.vocabSize = bundledVocabSize();
    c.hiddenSize = o.hidden;
    c.intermediateSize = o.intermediate;
    c.numLayers = o.layers;
    c.numHeads = o.heads;
    c.numKvHeads = o.kvHeads;
    c.headDim = o.heads > 0 ? o.hidden / o.heads : 0;
    c.maxPositions = o.maxPositions;
    c.normEps = kNormEps;
    c.ropeTheta = o.ropeTheta;
    if (o.heads <= 0 || o.hidden % o.heads != 0)
        throw ArgumentError("train: hidden (" + std::to_string(o.hidden) + ") must be a multiple of heads");
    return parseConfig(configJson(c, "float32"), "train options");
}

TrainableModel initModel(const ModelConfig& cfg, uint64_t seed) {
    TrainableModel m;
    m.config = cfg;
    eval::Rng rng(splitmix(seed ^ 0x1417ull));
    const double outScale = 1.0 / std::sqrt(2.0 * double(cfg.numLayers));  // residual branches add up
    for (const auto& [name, shape] : parameterShapes(cfg)) {
        int64_t numel = 1;
        for (int64_t d : shape) numel *= d;
        std::vector<float> v(static_cast<size_t>(numel), 1.0f);  // norms
        if (shape.size() == 2) {
            const bool out = endsWith(name, "o_proj.weight") || endsWith(name, "down_proj.weight");
            const double sd = kInitStd * (out ? outScale : 1.0);
            for (float& x : v) {  // Box-Muller on our own draws: the same init on every platform
                const double u1 = 1.0 - rng.unit(), u2 = rng.unit();
                x = float(sd * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
            }
        }
        at::Tensor t = at::tensor(v, at::TensorOptions().dtype(at::kFloat)).view(shape);
        m.parameters.push_back({name, t.requires_grad_(true)});
    }
    assemble(m);
    return m;
}

std::vector<int64_t> parseOffsets(const std::string& text) {
    std::vector<int64_t> out;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        size_t used = 0;
        int64_t v = 0;
        try {
            v = std::stoll(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used == 0 || used != item.size() || v < 1)
            throw ArgumentError("positional heads: '" + item + "' in '" + text + "' is not an offset >= 1");
        out.push_back(v);
    }
    return out;
}

void initPositionalHeads(TrainableModel& m, const std::vector<int64_t>& offsets) {
    if (offsets.empty()) return;
    const ModelConfig& c = m.config;
    const int64_t D = c.headDim, half = D / 2, E = c.hiddenSize, group = c.numHeads / c.numKvHeads;
    if (int64_t(offsets.size()) > group)
        throw ArgumentError("positional heads: " + std::to_string(offsets.size()) + " offsets, but KV head 0 serves " +
                            std::to_string(group) + " query heads");
    std::map<std::string, at::Tensor> byName(m.parameters.begin(), m.parameters.end());
    at::NoGradGuard noGrad;
    // Every embedding row gets the same norm r over dimensions 1.. and r in
    // dimension 0, so that after RMSNorm dimension 0 reads exactly sqrt(E / 2)
    // for every token (a spread of norms would move the keys' scores by more
    // than the margin between neighbouring positions).
    const double r = kInitStd * std::sqrt(double(E - 1));
    const double normed = std::sqrt(double(E) / 2.0);
    at::Tensor embed = byName.at("model.embed_tokens.weight");
    at::Tensor rest = embed.narrow(1, 1, E - 1);
    rest.mul_(r / rest.norm(2, {1}, /*keepdim=*/true).clamp_min(1e-12));
    embed.select(1, 0).fill_(r);
    // Per RoPE pair a score amplitude of 6 after the 1/sqrt(D) scaling: the
    // sum over pairs of 6 cos(theta_i (distance - offset)) peaks at the
    // offset with >= 97 % of the softmax over 2048 positions.
    const double pairProduct = 6.0 * std::sqrt(double(D)), amp = std::sqrt(pairProduct) / normed;
    const std::vector<double> theta = Rope::inverseFrequencies(c);
    at::Tensor wk = byName.at("model.layers.0.self_attn.k_proj.weight"), wq = byName.at("model.layers.0.self_attn.q_proj.weight");
    wk.narrow(0, 0, D).zero_();
    for (int64_t i = 0; i < half; ++i) wk[i][0] = amp;
    for (size_t h = 0; h < offsets.size(); ++h) {
        const int64_t row = int64_t(h) * D;
        wq.narrow(0, row, D).zero_();
        for (int64_t i = 0; i < half; ++i) {
            // Query pair amp·e^{-i theta o} against key pair amp: the dot
            // product after rotation is amp² cos(theta (distance - o)).
            wq[row + i][0] = amp * std::cos(theta[i] * double(offsets[h]));
            wq[row + i + half][0] = -amp * std::sin(theta[i] * double(offsets[h]));
        }
    }
}

TrainableModel loadTrainable(const fs::path& dir) {
    TrainableModel m;
    m.config = loadConfig(dir / "config.json");
    WeightStore store = WeightStore::open(dir);
    for (const auto& [name, shape] : parameterShapes(m.config))
        m.parameters.push_back({name, store.get(name, shape, at::kFloat, at::kCPU).requires_grad_(true)});
    assemble(m);
    return m;
}

void writeModelDir(const TrainableModel& m, const fs::path& dir, bool bf16) {
    fs::create_directories(dir);
    std::vector<at::Tensor> held;
    std::vector<TensorBlob> blobs;
    for (const auto& [name, t] : m.parameters) {
        held.push_back(t.detach().to(bf16 ? at::kBFloat16 : at::kFloat).contiguous());
        blobs.push_back({name, bf16 ? DType::BF16 : DType::F32, held.back().sizes().vec(), held.back().data_ptr()});
    }
    writeSafetensors(dir / "model.safetensors", blobs, {{"format", "pt"}});
    writeFileAtomically(dir / "config.json", configJson(m.config, bf16 ? "bfloat16" : "float32"));
    eval::Vocabulary::bundled().writeTokenizerJson(dir / "tokenizer.json");
}

TrainSequence trainingSequence(const TrainOptions& o, int64_t step, int64_t index, int64_t seqLen) {
    eval::Rng rng(splitmix(splitmix(splitmix(o.seed) ^ uint64_t(step)) ^ uint64_t(index)));
    const bool needle = rng.chance(o.needleFraction);
    const eval::CorpusOptions co = needle ? eval::applyCorpusMix(eval::needleStyleOptions(), o.needleMix)
                                          : eval::applyCorpusMix({}, o.mix);
    const eval::Document doc = eval::generateDocument(co, rng.next(), seqLen - 1);
    const auto& vocab = eval::Vocabulary::bundled();
    TrainSequence s;
    s.tokens.reserve(static_cast<size_t>(seqLen));
    s.tokens.push_back(eval::kBosId);
    for (const auto& w : doc.words) {
        auto id = vocab.id(w);
        if (!id) throw Error("corpus word '" + w + "' is not in the bundled vocabulary");
        s.tokens.push_back(*id);
    }
    // Word p is token p + 1, i.e. target p.
    for (const auto& a : doc.answers) {
        if (a.kind == eval::AnswerKind::Fact) s.factTargets.push_back(a.position);
        s.answerTargets.push_back(a.position);
    }
    s.answerWeight = o.answerWeight;
    return s;
}

at::Tensor sequenceLoss(const Model& model, const TrainSequence& seq, AnswerHits* hits) {
    const std::vector<int64_t> inputs(seq.tokens.begin(), seq.tokens.end() - 1);
    at::Tensor targets = at::tensor(std::vector<int64_t>(seq.tokens.begin() + 1, seq.tokens.end()),
                                    at::TensorOptions().dtype(at::kLong));
    KvCache cache = model.newCache();
    at::Tensor logits = model.forward(inputs, cache).logits;  // [n, V]
    if (hits) {
        at::Tensor pred = logits.detach().argmax(-1);
        auto p = pred.accessor<int64_t, 1>();
        *hits = {};
        for (int64_t i : seq.factTargets) hits->facts += p[i] == seq.tokens[i + 1];
        for (int64_t i : seq.answerTargets) hits->answers += p[i] == seq.tokens[i + 1];
    }
    if (seq.answerWeight == 1.0 || seq.answerTargets.empty()) return at::cross_entropy_loss(logits, targets);
    std::vector<float> weights(static_cast<size_t>(targets.size(0)), 1.0f);
    for (int64_t i : seq.answerTargets) weights[static_cast<size_t>(i)] = float(seq.answerWeight);
    at::Tensor w = at::tensor(weights, at::TensorOptions().dtype(at::kFloat));
    at::Tensor perToken = at::cross_entropy_loss(logits, targets, {}, at::Reduction::None);
    return (perToken * w).sum() / w.sum();
}

TrainOptions loadTrainOptions(const fs::path& dir) {
    json state = readState(dir);
    return optionsFromJson(state.at("options"), dir);
}

TrainResult train(const TrainOptions& o, const TrainProgress& progress) {
    validate(o);
    const auto stages = parseCurriculum(o.curriculum);
    applyThreads(o.threads);
    fs::create_directories(o.outDir);
    TrainResult r;
    TrainableModel m;
    if (o.resume) {
        json state = readState(o.outDir);
        checkResumable(o, state.at("options"), checkpointDir(o.outDir) / "state.json");
        m = loadTrainable(checkpointDir(o.outDir));
        r.startStep = state.at("step").get<int64_t>();
    } else {
        if (fs::exists(checkpointDir(o.outDir)))
            throw ArgumentError(o.outDir.string() + " already holds a training run: resume it or choose another directory");
        // A model folder is never replaced by a new run (its weights and config would be lost).
        for (const char* f : {"config.json", "model.safetensors", "model.safetensors.index.json"})
            if (fs::exists(o.outDir / f))
                throw ArgumentError("train --out " + o.outDir.string() + ": the folder already holds a model (" + f +
                                    "); a new run would overwrite it: choose a new folder");
        if (o.initFrom.empty()) {
            m = initModel(trainConfig(o), o.seed);
            initPositionalHeads(m, parseOffsets(o.positionalHeads));
        } else {
            // A training run's folder: its exact f32 checkpoint, not the BF16 copy beside it.
            const fs::path from = fs::exists(checkpointDir(o.initFrom) / "model.safetensors") ? checkpointDir(o.initFrom)
                                                                                               : fs::path(o.initFrom);
            m = loadTrainable(from);
            const ModelConfig want = trainConfig(o);
            const ModelConfig& got = m.config;
            if (got.numLayers != want.numLayers || got.hiddenSize != want.hiddenSize || got.numHeads != want.numHeads ||
                got.numKvHeads != want.numKvHeads || got.intermediateSize != want.intermediateSize ||
                got.vocabSize != want.vocabSize)
                throw ArgumentError("train: --init-from " + o.initFrom +
                                    " has another shape than the options (give the same --layers, --hidden, --heads, "
                                    "--kv-heads, --intermediate)");
            m.config = want;  // max positions and RoPE base as the options say
            assemble(m);
        }
    }
    std::vector<at::Tensor> params, decay, noDecay;
    for (const auto& p : m.parameters) {
        params.push_back(p.second);
        (p.second.dim() >= 2 ? decay : noDecay).push_back(p.second);
    }
    r.parameters = m.model->parameterCount();
    using torch::optim::AdamWOptions;
    std::vector<torch::optim::OptimizerParamGroup> groups;
    auto adamw = [&](double wd) {
        return AdamWOptions(o.lr).betas(std::make_tuple(0.9, 0.95)).weight_decay(wd);  // beta2 0.95: short runs
    };
    groups.emplace_back(decay, std::make_unique<AdamWOptions>(adamw(o.weightDecay)));
    groups.emplace_back(noDecay, std::make_unique<AdamWOptions>(adamw(0.0)));
    torch::optim::AdamW opt(std::move(groups), adamw(o.weightDecay));
    if (o.resume) torch::load(opt, (checkpointDir(o.outDir) / "optimizer.pt").string());
    std::ofstream log = openLog(o.outDir / "train_log.csv", r.startStep);

    int64_t step = r.startStep;
    const int64_t last = o.until > 0 ? o.until : o.steps;
    for (; step < last; ++step) {
        const auto t0 = std::chrono::steady_clock::now();
        StepReport rep;
        rep.steps = o.steps;
        rep.seqLen = sequenceLength(stages, step);
        rep.lr = learningRate(o, step);
        for (auto& g : opt.param_groups()) static_cast<AdamWOptions&>(g.options()).lr(rep.lr);
        opt.zero_grad();
        int64_t facts = 0, answers = 0;
        AnswerHits correct;
        for (int64_t b = 0; b < o.batch; ++b) {
            // One sequence at a time: its graph is freed before the next is built.
            const TrainSequence seq = trainingSequence(o, step, b, rep.seqLen);
            AnswerHits c;
            at::Tensor loss = sequenceLoss(*m.model, seq, &c);
            loss.div(double(o.batch)).backward();
            rep.loss += loss.item<double>() / double(o.batch);
            facts += static_cast<int64_t>(seq.factTargets.size());
            answers += static_cast<int64_t>(seq.answerTargets.size());
            correct.facts += c.facts;
            correct.answers += c.answers;
        }
        // A loss or a weight that is no longer a number would be written into
        // every later checkpoint: stop, keeping the last checkpoint as it was.
        const bool lossFinite = std::isfinite(rep.loss);
        if (lossFinite) {
            clipGradients(params, o.gradClip);
            opt.step();
        }
        if (!lossFinite || !allFinite(params)) {
            const std::string what = lossFinite ? "the weights stopped being numbers" : "the loss is " + std::to_string(rep.loss);
            throw ArgumentError("train: " + what + " at step " + std::to_string(step + 1) + " (learning rate " +
                                std::to_string(rep.lr) + " too high?): stopped; the last checkpoint is kept as it was");
        }
        rep.step = step + 1;
        rep.factAccuracy = facts ? double(correct.facts) / double(facts) : -1.0;
        rep.answerAccuracy = answers ? double(correct.answers) / double(answers) : -1.0;
        rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        rep.tokensPerSecond = double(o.batch * (rep.seqLen - 1)) / rep.seconds;
        rep.model = m.model.get();
        rep.checkpointed = rep.step % o.checkpointEvery == 0 || rep.step == last;
        if (rep.checkpointed) writeCheckpoint(o, m, opt, rep.step);
        log << rep.step << ',' << rep.seqLen << ',' << rep.lr << ',' << rep.loss << ',' << rep.factAccuracy << ','
            << rep.seconds << ',' << rep.tokensPerSecond << ',' << rep.answerAccuracy << std::endl;
        if (!log) throw IoError("cannot write " + (o.outDir / "train_log.csv").string() + ": " + std::strerror(errno));
        r.losses.push_back(rep.loss);
        if (progress && !progress(rep)) {
            if (!rep.checkpointed) writeCheckpoint(o, m, opt, rep.step);
            ++step;
            break;
        }
    }
    r.endStep = step;
    return r;
}

}  // namespace kvlens
