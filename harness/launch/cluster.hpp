#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "harness/campaign/campaign.hpp"
#include "harness/launch/arm.hpp"
#include "harness/launch/host.hpp"

namespace tandem::harness {

enum class Role { kCoordinator, kWorker };  // the peer rank runs the worker image
std::string_view ToString(Role role);

// Where one role of one arm runs from on one host: the executable there (a binary or git
// arm's content-addressed copy, ~/.cache/tandem/images/SHA256/NAME, taken when the campaign
// starts, on the harness's machine too) or the container image, and its identity as read
// on that host.
struct PlacedImage {
  std::string arm;
  Role role = Role::kCoordinator;
  std::string host;
  std::string executable;  // binary / git
  std::string image;       // container: the image as named
  std::string id;          // sha256 of the executable computed on the host, or the image ID there (sha256:…)
};

// The hosts of a campaign, connected, with the model and every arm's images in place on
// each host that needs them. Built before the first session: any host that cannot be
// reached, lacks the model, cannot run an executable or lacks an image stops the run with
// an InputError naming the host and why, and an image whose ID differs between hosts is
// refused naming the hosts and the IDs. The master SSH connections live as long as this.
class Cluster {
 public:
  // `model` is the campaign's checkpoint on the harness's machine, `model_revision` its
  // revision. A preset model (synthetic, or the small trained one) is copied to each other
  // host under ~/.cache/tandem/models/PRESET-seedS-REVISION (a trained preset:
  // PRESET-REVISION) and verified file by file; a model path
  // must exist at the same path on every host. `check_only` (a dry run): connect and
  // check, copy nothing.
  static std::unique_ptr<Cluster> Prepare(const Campaign& campaign, std::vector<ResolvedArm>& arms, const std::filesystem::path& model,
                                          const std::string& model_revision, bool check_only, std::ostream& log);

  const Host& host(const std::string& name) const;
  // The checkpoint directory on `host`.
  const std::string& model_dir(const std::string& host) const;
  const PlacedImage& image(const std::string& arm, Role role, const std::string& host) const;
  const std::vector<PlacedImage>& images() const { return images_; }
  // Every connected host, "local" first.
  std::vector<const Host*> hosts() const;
  ~Cluster();  // closes the connections and removes their directory (sockets, ssh logs)

 private:
  Cluster() = default;
  // Every arm's images on every host that runs them; a container image must be the same everywhere.
  void PlaceImages(const Campaign& c, std::vector<ResolvedArm>& arms, bool check_only, std::ostream& log);
  void PlaceImages(const Campaign& c, ResolvedArm& arm, Role role, bool check_only, std::ostream& log);
  // The model on every host (see Prepare).
  void PlaceModel(const Campaign& c, const std::filesystem::path& model, const std::string& model_revision, bool check_only,
                  std::ostream& log);

  std::filesystem::path control_dir_;
  std::map<std::string, std::unique_ptr<Host>> hosts_;
  std::map<std::string, std::string> model_dirs_;
  std::vector<PlacedImage> images_;
};

// The hosts each layout of the campaign uses (with "local" when an external or command arm
// runs there), in campaign order.
std::vector<std::string> HostsUsed(const Campaign& campaign);

}  // namespace tandem::harness
